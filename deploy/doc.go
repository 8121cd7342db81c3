// Package deploy holds pacer's deployment files: the systemd unit
// (pacer.service, verified in cli's TestServiceUnit) and the Prometheus
// alerting rules (alerts.yml, tested by alerts_test.go with promtool).
package deploy
