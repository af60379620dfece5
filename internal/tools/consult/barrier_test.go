package consult

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// barrier holds its parties — fake-ai CLIs in mode barrier and chats with
// the fake API's model "barrier" — until every one of them is running:
// runs that are parallel pass it at once; runs one after another never do
// (the first waits alone), and the test says so, whatever the machine's
// speed. No timing is measured.
type barrier struct {
	t       *testing.T
	dir     string
	arrived chan string
	release chan struct{} // closed when every party arrived
}

func newBarrier(t *testing.T, e *env) *barrier {
	t.Helper()
	b := &barrier{t: t, dir: sharedDir(t, 0o777), arrived: make(chan string, 16), release: make(chan struct{})}
	arrive := b.fifo("arrive")
	// Opened for reading and writing: it never reports the end when a
	// party closes it, and the open does not wait for a writer.
	f, err := os.OpenFile(arrive, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			b.arrived <- sc.Text()
		}
	}()
	e.api.mu.Lock()
	e.api.hold = func(ctx context.Context) {
		b.arrived <- "api"
		select {
		case <-b.release:
		case <-ctx.Done():
		}
	}
	e.api.mu.Unlock()
	return b
}

// fifo makes a named pipe in the barrier's directory that the CLIs' uid
// can open.
func (b *barrier) fifo(name string) string {
	path := filepath.Join(b.dir, name)
	if err := mkfifo(path); err != nil {
		b.t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil { // past the umask
		b.t.Fatal(err)
	}
	return path
}

// cli makes p (a fake-ai provider named name) a party.
func (b *barrier) cli(p ProviderConfig, name string) ProviderConfig {
	b.fifo("release-" + name)
	p.Sandbox.Env["FAKE_MODE"], p.Sandbox.Env["FAKE_BARRIER"] = "barrier", b.dir
	return p
}

// await waits (30 s at most) until the parties named have all arrived,
// then releases them; it fails the test naming those that ran alone (and
// lets those that come later through, so the call ends). CLI parties are
// released through their FIFOs, the API's by release.
func (b *barrier) await(parties ...string) {
	b.t.Helper()
	var got []string
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for len(got) < len(parties) {
		select {
		case name := <-b.arrived:
			got = append(got, name)
			continue
		case <-timeout.C:
			b.t.Errorf("of %v, only %v were running at once after 30 s: the runs are not parallel", parties, got)
			go func() {
				for name := range b.arrived {
					b.pass(name)
				}
			}()
		}
		break
	}
	close(b.release)
	for _, name := range got {
		b.pass(name)
	}
}

// pass releases the CLI party name.
func (b *barrier) pass(name string) {
	if name == "api" {
		return
	}
	f, err := os.OpenFile(filepath.Join(b.dir, "release-"+name), os.O_WRONLY, 0)
	if err != nil {
		return // the test has ended
	}
	_, _ = f.WriteString("go\n")
	f.Close()
}
