// Package deploy holds pacer's deployment files: the systemd unit
// (pacer.service, verified in cli's TestServiceUnit), the Prometheus
// alerting rules (alerts.yml, tested by alerts_test.go with promtool) and
// the Debian package's description (nfpm.yaml, with its config, sysusers.d
// file and maintainer scripts in debian/; built by scripts/package.sh and
// installed into a temporary root by package_test.go).
package deploy
