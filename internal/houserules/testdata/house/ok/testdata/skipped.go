package skipped

var state int
