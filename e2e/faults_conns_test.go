//go:build faults

package e2e

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// The processes behind the fault upstream's arrivals. The upstream runs in
// the test process and stamps a request when its handler gets to it: on a
// loaded machine that is up to tens of milliseconds after the client sent
// it. A request that a member sent just before the test stopped and killed
// it can then be stamped after the kill: the time alone says it came after,
// from someone else. Its connection says who sent it.

// crashHandlerLag bounds how long after a kill a request the victim sent
// before it was stopped may reach the upstream's handler (an ephemeral
// port of the victim may be some other process's later).
const crashHandlerLag = 2 * time.Second

// tcpEnds returns the local ends of the TCP sockets process pid holds (as
// the server's http.Request.RemoteAddr shows them), from /proc. Read while
// pid is stopped, they are the connections it sent its last requests on.
func tcpEnds(pid int) (map[netip.AddrPort]bool, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, fmt.Errorf("descriptors of %d: %w", pid, err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") && strings.HasSuffix(link, "]") {
			inodes[link[len("socket:["):len(link)-1]] = true
		}
	}
	out := map[netip.AddrPort]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue // no IPv6
		}
		for _, l := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(l)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			if ap, ok := procAddrPort(f[1]); ok {
				out[ap] = true
			}
		}
	}
	return out, nil
}

// procAddrPort parses an address of /proc/net/tcp{,6}: the address's
// 32-bit words in hex, each in the host's (little-endian) order, a colon,
// the port in hex.
func procAddrPort(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(h)
	port, perr := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || perr != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}

// sentBy reports whether arrival a is a request that k's victim sent
// before it was stopped and that the upstream's handler got to only after
// the kill: a poll of the victim cut off by the kill.
func (k crashKill) sentBy(a faultArrival) bool {
	if k.final || !a.At.After(k.at) || !a.At.Before(k.at.Add(crashHandlerLag)) {
		return false
	}
	ap, err := netip.ParseAddrPort(a.From)
	return err == nil && k.conns[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())]
}

// crashSender names the member whose connection request a came over, as
// read at its kill or before the final stop ("?" when none: a connection
// closed before those reads).
func crashSender(a faultArrival, kills []crashKill) string {
	ap, err := netip.ParseAddrPort(a.From)
	if err != nil {
		return "?"
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	for _, k := range kills {
		if k.conns[ap] {
			return k.victim
		}
	}
	return "?"
}

// crashBefore describes arrival i of arr ("none" before the first).
func crashBefore(arr []faultArrival, i int, kills []crashKill) string {
	if i < 0 {
		return "none"
	}
	return "at " + arr[i].At.Format("15:04:05.000") + " by " + crashSender(arr[i], kills)
}
