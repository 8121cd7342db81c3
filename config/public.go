package config

import "go.yaml.in/yaml/v3"

// publicStr reads a string at p whose ${VAR} substitutions are not
// secrets: admin.listen, an address, which the start log shows (a token
// is a secret; where the daemon listens is not). What the read recorded as
// secrets and masks is dropped; a value that another key substitutes too
// is recorded by that key, before or after, and stays a secret.
func (l *decoder) publicStr(n *yaml.Node, p path) (string, bool) {
	secrets, masks := len(l.secrets), len(l.maskList)
	v, ok := l.str(n, p)
	for _, s := range l.secrets[secrets:] {
		delete(l.secretOK, s)
	}
	l.secrets = l.secrets[:secrets]
	for value, i := range l.masks {
		if i >= masks {
			delete(l.masks, value)
		}
	}
	l.maskList = l.maskList[:masks]
	return v, ok
}
