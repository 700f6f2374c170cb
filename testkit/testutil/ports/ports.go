// Package ports hands tests loopback addresses that nothing else will take
// between the moment they are chosen and the moment a server binds them.
//
// Asking the kernel for port 0 and closing the listener is racy: the port
// goes back to the ephemeral range, where any outgoing connection (of this
// test binary or of another package's, running in parallel) may take it
// as its source port before the server binds it. CI saw exactly that
// ("raft listen 127.0.0.1:40441: bind: address already in use").
//
// So ports are chosen below the kernel's ephemeral range, which outgoing
// connections never use, and each is claimed with an flock on a file
// under the temp dir, held until the process exits, so that concurrently
// running test binaries never hand out the same port. A port is handed out
// only if TCP and UDP binds on it succeed at that moment (memberlist binds
// both). A port stays claimed for the whole test binary, so a test that
// restarts a node on the same address finds it free.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var (
	mu    sync.Mutex
	held  = map[int]*os.File{} // claimed ports; the files stay open (and locked) until exit
	lo    = 10000
	hi    = 32767 // exclusive upper bound; lowered to the ephemeral range's start
	ready bool
)

func setup() {
	if ready {
		return
	}
	ready = true
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return
	}
	start, err1 := strconv.Atoi(f[0])
	end, err2 := strconv.Atoi(f[1])
	switch {
	case err1 != nil || err2 != nil:
	case start > lo+1000:
		hi = min(hi, start)
	case end < 64535: // the range starts low: use what lies above it
		lo, hi = end+1, 65536
	}
	// Otherwise no range is outside the ephemeral one; the flock claims
	// and the bind check still keep test binaries from colliding.
}

// Addr returns "127.0.0.1:port" for a port claimed for this process.
func Addr() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	setup()
	dir := filepath.Join(os.TempDir(), "strand-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", err
	}
	_ = os.Chmod(dir, 0o777|os.ModeSticky) // shared by every user's tests, whatever the umask
	for range 2000 {
		p := lo + rand.IntN(hi-lo)
		if _, ok := held[p]; ok {
			continue
		}
		if f, ok := claim(dir, p); ok {
			held[p] = f
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
		}
	}
	return "", fmt.Errorf("ports: no free loopback port in [%d, %d)", lo, hi)
}

// Block claims n consecutive ports and returns the first, for a server (or
// a script) that derives its ports from a base, such as scripts/run.sh's
// PORT_BASE (node N's Kafka listener at base+10(N-1), plus 1, 2, 3, 4 and
// 5 for Raft, gossip, metrics, inter-broker and gRPC).
func Block(n int) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	setup()
	dir := filepath.Join(os.TempDir(), "strand-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, err
	}
	_ = os.Chmod(dir, 0o777|os.ModeSticky)
	for range 500 {
		base := lo + rand.IntN(hi-lo-n)
		var got []*os.File
		for p := base; p < base+n; p++ {
			if _, ok := held[p]; ok {
				break
			}
			f, ok := claim(dir, p)
			if !ok {
				break
			}
			got = append(got, f)
		}
		if len(got) == n {
			for i, f := range got {
				held[base+i] = f
			}
			return base, nil
		}
		for _, f := range got {
			f.Close() // releases the lock
		}
	}
	return 0, fmt.Errorf("ports: no %d consecutive free loopback ports in [%d, %d)", n, lo, hi)
}

// claim locks port p's file and checks the port binds; the open file holds
// the claim.
func claim(dir string, p int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false // another test binary holds it
	}
	if !bindable(net.JoinHostPort("127.0.0.1", strconv.Itoa(p))) {
		f.Close() // in use by something outside our claims; leave it
		return nil, false
	}
	return f, true
}

func bindable(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}
