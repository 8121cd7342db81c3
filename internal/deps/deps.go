// Package deps pins dependencies until the code that uses them lands (temporary).
package deps
import (
 _ "github.com/sony/gobreaker/v2"
 _ "github.com/robfig/cron/v3"
 _ "gorm.io/gorm"
 _ "gorm.io/driver/sqlite"
 _ "golang.org/x/time/rate"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/coreos/go-systemd/v22/daemon"
 _ "go.yaml.in/yaml/v3"
 _ "go.uber.org/goleak"
)
