package view

// Explained is a source object with Why, the explanation of its wait
// (Explain). It is the admin API's source object: "why" is a field added to
// those of contract section 4.
type Explained struct {
	SourceObject
	Why string `json:"why"`
}

// Row is one source as the dashboard's table filters and sorts it: the
// few fields it needs, copied in one pass, so that a page over 100,000
// sources builds no full source object but those it shows.
type Row struct {
	Name        string
	Type        string
	State       string
	Failures    int
	LastSuccess int64 // UnixNano; 0 = none
	NextRun     int64 // UnixNano; 0 = none (also in error and paused)
}
