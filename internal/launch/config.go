package launch

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/egress"
)

// Config is what the launcher learns once for every program it starts: the
// host-wide keys of toold's `commands:` section (its tools aside). Zero
// values take the documented defaults.
type Config struct {
	// Containment is the default isolation of every program: auto
	// (default), none, namespaces or bwrap (Linux), seatbelt (macOS), job
	// (Windows). See the package doc.
	Containment string `yaml:"containment" validate:"omitempty,oneof=auto none namespaces bwrap seatbelt job"`
	// RunAs is the unprivileged identity programs run as when toold is
	// root (default 65534:65534, "nobody"). Ignored when toold is not root:
	// a process cannot change its uid then.
	RunAs RunAs `yaml:"run_as"`
	// Rlimits are the defaults of every program; a sandbox's own rlimits
	// override them field by field.
	Rlimits Rlimits `yaml:"rlimits"`
	// MaxOutputBytes caps stdout and stderr each (default 1 MiB); a run
	// that writes more is stopped.
	MaxOutputBytes int `yaml:"max_output_bytes" validate:"gte=0,lte=268435456"`
	// KillGrace is how long a program has between SIGTERM and SIGKILL when
	// its run times out or is cancelled (default 500ms).
	KillGrace time.Duration `yaml:"kill_grace" validate:"gte=0,lte=30s"`
	// Bwrap is the bubblewrap binary (default: "bwrap" on PATH).
	Bwrap string `yaml:"bwrap"`
	// Egress is what the egress proxies of allow-list runs get from
	// toold (metrics, the resolver, whether a credential vault exists).
	// Set by toold's wiring, never from the file.
	Egress egress.Options `yaml:"-" validate:"-"`
	// Private are toold's own files and directories (its state, its
	// configuration, the audit key): no program may read or write them,
	// whatever its sandbox allows (macOS: denied by the Seatbelt profile;
	// Windows: labelled so that low integrity can neither read nor write
	// them; Linux: not in the minimal root or bwrap's), and a sandbox
	// whose read_only_paths would bind one in is refused. Set by toold
	// from its own settings, never from the file.
	Private []string `yaml:"-"`
}

// RunAs is a uid/gid pair; nil fields take 65534.
type RunAs struct {
	UID *int `yaml:"uid" validate:"omitempty,gte=0,lte=4294967294"`
	GID *int `yaml:"gid" validate:"omitempty,gte=0,lte=4294967294"`
}

// Rlimits bound what one program may consume. Zero fields inherit (a
// sandbox's from the Config's, the Config's from the defaults); -1 means
// unlimited.
type Rlimits struct {
	// CPU is CPU time (default 30s): SIGXCPU at the limit, SIGKILL 1s later.
	CPU time.Duration `yaml:"cpu" validate:"gte=-1"`
	// AddressSpace is virtual memory in bytes (default 512 MiB).
	AddressSpace int64 `yaml:"address_space" validate:"gte=-1"`
	// FileSize is the largest file a command may write, in bytes
	// (default 10 MiB): SIGXFSZ beyond it.
	FileSize int64 `yaml:"file_size" validate:"gte=-1"`
	// OpenFiles bounds file descriptors (default 1024).
	OpenFiles int `yaml:"open_files" validate:"gte=-1,lte=1048576"`
	// Processes bounds the processes of the uid commands run as (default
	// 256). It holds only where commands run under a uid of their own:
	// toold root with run_as (none, namespaces), or bwrap's user namespace.
	Processes int `yaml:"processes" validate:"gte=-1,lte=1048576"`

	// Per run (every process of one call together), enforced by the run's
	// cgroups where toold can create them (root, or a delegated cgroup v2
	// subtree); each result's "limits" says what held. With cgroups,
	// Processes above is the run's pids.max rather than a per-uid rlimit.

	// Memory bounds the run's memory, its /tmp included (default 1 GiB).
	Memory int64 `yaml:"memory" validate:"gte=-1"`
	// CPUs bounds the run's CPU bandwidth, in CPUs (default 1).
	CPUs float64 `yaml:"cpus" validate:"gte=-1"`
	// TmpSize caps the run's private /tmp, a tmpfs under namespaces as
	// root (default 64 MiB).
	TmpSize int64 `yaml:"tmp_size" validate:"gte=-1"`
}

// Sandbox is how one program is contained: the `sandbox:` of a command
// tool, of execute_command, of a stdio MCP server and of a consultation
// CLI. Each embeds it (yaml ",inline") with what only it has; this type is
// the one declaration of these keys, their rules and their meaning.
type Sandbox struct {
	// Containment: auto, none, namespaces, bwrap, seatbelt or job (default:
	// the commands section's containment, itself auto by default). See the
	// package doc.
	Containment string `yaml:"containment" validate:"omitempty,oneof=auto none namespaces bwrap seatbelt job"`
	// Network is the program's network: false (none: under namespaces
	// and bwrap no interface but a down loopback), true (all of it but
	// toold's own ports), or an allow-list, {allow, inject, ca_files,
	// max_connections, max_bytes}: the program's only way out is then
	// toold's egress proxy inside its network namespace (internal/egress;
	// namespaces and bwrap only). Off by default for command tools and MCP
	// servers, on for consultation CLIs (they call their vendor);
	// containment none cannot take the network away.
	Network *Network `yaml:"network"`
	// WorkspaceWritable lets the program change the workspace. Off by
	// default: under namespaces and bwrap the workspace is mounted
	// read-only. Containment none relies on file permissions.
	WorkspaceWritable bool `yaml:"workspace_writable"`
	// ReadOnlyPaths are extra absolute host paths the program may read, for
	// a toolchain outside the system directories (/usr/local/go,
	// ~/.local/share/cursor-agent): bound read-only under namespaces and
	// bwrap. Containment none sees the host's file system anyway.
	ReadOnlyPaths []string `yaml:"read_only_paths" validate:"dive,required"`
	// UnixSockets are absolute paths of unix sockets the program may
	// connect to (an ssh agent, a database's socket). No other socket
	// outside the run's own temporary directory is reachable: macOS's
	// profile allows connecting to these only; Linux binds each into the
	// run (namespaces, bwrap); Windows grants the sandbox's capability an
	// ACE on each. A socket of the host's services (docker.sock, the
	// user's agents) is otherwise out of reach, network or not.
	UnixSockets []string `yaml:"unix_sockets" validate:"dive,required"`
	// EnvAllow names variables copied from toold's environment; nothing
	// else is inherited. (An MCP server says env_allow and env on the
	// server itself, not in its sandbox.)
	EnvAllow []string `yaml:"env_allow" validate:"dive,required,excludesall=="`
	// Env sets fixed variables (they win over EnvAllow).
	Env map[string]string `yaml:"env" validate:"dive,keys,required,excludesall==,endkeys"`
	// Rlimits override the commands section's, field by field. MCP servers
	// and consultation CLIs get no CPU-time or address-space limit unless
	// set here: node and python reserve far more address space than they
	// use, a server lives as long as toold, and a CLI's timeout bounds it.
	Rlimits Rlimits `yaml:"rlimits"`
	// MaxOutputBytes caps stdout and stderr each (default: the commands
	// section's max_output_bytes, else 1 MiB); a program that writes more is
	// stopped. Not for MCP servers: their stdout is their protocol.
	MaxOutputBytes int `yaml:"max_output_bytes" validate:"gte=0,lte=268435456"`
	// Seccomp: false runs the program without the syscall filter of
	// namespaces and bwrap (on by default: nested user namespaces, mounts,
	// bpf, perf_event_open, keyctl, io_uring and every socket but unix, TCP,
	// UDP and netlink route denied; Linux). For a program that needs one of
	// them; every result says so. While toold's ports are protected the
	// port guard's socket rules (and no io_uring) hold regardless.
	Seccomp *bool `yaml:"seccomp"`
}

// Check reports what the struct tags cannot: every read_only_paths and
// unix_sockets entry must be absolute, and an allow-list must hold
// (egress.Policy.Check; a caller's own credential is checked against the
// vault when the launcher resolves the sandbox). The launcher checks it
// again then.
func (s Sandbox) Check() error {
	for _, p := range s.ReadOnlyPaths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("read_only_paths: %q is not absolute", p)
		}
	}
	for _, p := range s.UnixSockets {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("unix_sockets: %q is not absolute", p)
		}
	}
	if p := s.Network.AllowList(); p != nil {
		if err := p.Check(true); err != nil {
			return prefixLines("network.", err)
		}
	}
	return nil
}

// prefixLines puts prefix before every line of err.
func prefixLines(prefix string, err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return errors.New(strings.Join(lines, "\n"))
}

// networkOn says whether the sandbox shares the host's network: as set,
// else off; an allow-list does not.
func (s Sandbox) networkOn() bool { return s.Network != nil && s.Network.on && !s.Network.list }

// Network is a sandbox's `network:`, written as a boolean or as an
// allow-list mapping (egress.Policy's keys).
type Network struct {
	on, list      bool
	egress.Policy `yaml:",inline"`
}

// NetworkOn is `network: true`, NetworkOff `network: false`.
func NetworkOn() *Network  { return &Network{on: true} }
func NetworkOff() *Network { return &Network{} }

// AllowList is `network:` as an allow-list.
func AllowList(p egress.Policy) *Network { return &Network{on: true, list: true, Policy: p} }

// On says whether the program has a network at all (true, or an
// allow-list).
func (n *Network) On() bool { return n != nil && n.on }

// AllowList is the policy of the mapping form, or nil.
func (n *Network) AllowList() *egress.Policy {
	if n == nil || !n.list {
		return nil
	}
	return &n.Policy
}

// UnmarshalYAML takes true, false or a mapping.
func (n *Network) UnmarshalYAML(v *yaml.Node) error {
	switch v.Kind {
	case yaml.ScalarNode:
		var b bool
		if err := v.Decode(&b); err != nil {
			return fmt.Errorf("line %d: network: give true, false, or a mapping with allow (and inject, ca_files, max_connections, max_bytes)", v.Line)
		}
		*n = Network{on: b}
		return nil
	case yaml.MappingNode:
		var p egress.Policy
		if err := v.Decode(&p); err != nil {
			return err
		}
		*n = *AllowList(p)
		return nil
	}
	return fmt.Errorf("line %d: network: give true, false, or a mapping with allow", v.Line)
}

// Defaults of the package, documented on the fields above.
const (
	DefaultMaxOutputBytes = 1 << 20
	DefaultKillGrace      = 500 * time.Millisecond
	DefaultUID            = 65534
	defaultCPU            = 30 * time.Second
	defaultAddressSpace   = 512 << 20
	defaultFileSize       = 10 << 20
	defaultOpenFiles      = 1024
	defaultProcesses      = 256
	defaultMemory         = 1 << 30
	defaultCPUs           = 1
	defaultTmpSize        = 64 << 20
)

// merge returns r with every zero field taken from d.
func (r Rlimits) merge(d Rlimits) Rlimits {
	r.CPU = cmp.Or(r.CPU, d.CPU)
	r.AddressSpace = cmp.Or(r.AddressSpace, d.AddressSpace)
	r.FileSize = cmp.Or(r.FileSize, d.FileSize)
	r.OpenFiles = cmp.Or(r.OpenFiles, d.OpenFiles)
	r.Processes = cmp.Or(r.Processes, d.Processes)
	r.Memory = cmp.Or(r.Memory, d.Memory)
	r.CPUs = cmp.Or(r.CPUs, d.CPUs)
	r.TmpSize = cmp.Or(r.TmpSize, d.TmpSize)
	return r
}

// unboundedUnlessSet is the rlimits of a program that is not a command
// tool (Runner, Start): no CPU-time or address-space limit unless set
// here (the Config's defaults do not apply to these two). A long-lived
// server accumulates CPU time; node and python reserve far more address
// space than they use; a run's timeout or Stop bounds the program.
func (r Rlimits) unboundedUnlessSet() Rlimits {
	if r.CPU == 0 {
		r.CPU = -1
	}
	if r.AddressSpace == 0 {
		r.AddressSpace = -1
	}
	return r
}

func defaultRlimits() Rlimits {
	return Rlimits{CPU: defaultCPU, AddressSpace: defaultAddressSpace, FileSize: defaultFileSize,
		OpenFiles: defaultOpenFiles, Processes: defaultProcesses,
		Memory: defaultMemory, CPUs: defaultCPUs, TmpSize: defaultTmpSize}
}
