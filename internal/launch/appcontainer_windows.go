package launch

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"unicode/utf16"
	"unsafe"

	"golang.org/x/sys/windows"
)

// The Win32 calls behind a job run's AppContainer (job.go says what they
// make), written from their documented signatures. Not run where this was
// written (no Windows machine): compiled and vetted by CI's GOOS=windows
// go vet, and tried on a real machine by `toold sandbox selftest`.

var (
	userenv = windows.NewLazySystemDLL("userenv.dll")
	// HRESULT DeriveAppContainerSidFromAppContainerName(PCWSTR, PSID*):
	// the SID of an AppContainer name, freed with FreeSid. No profile is
	// made: the run's identity needs none, and none is left behind.
	procDeriveAppContainerSid = userenv.NewProc("DeriveAppContainerSidFromAppContainerName")
)

// Process and thread attributes x/sys has no constant for
// (ProcThreadAttributeValue(n, FALSE, TRUE, FALSE)).
const (
	procThreadAttributeSecurityCapabilities = 0x00020009 // SECURITY_CAPABILITIES
	procThreadAttributeJobList              = 0x0002000D // HANDLE[]: created inside these jobs (Windows 10)
)

// securityCapabilities is SECURITY_CAPABILITIES.
type securityCapabilities struct {
	AppContainerSid *windows.SID
	Capabilities    *windows.SIDAndAttributes
	CapabilityCount uint32
	Reserved        uint32
}

// The well-known capabilities of a run with the network.
var networkCapSIDs = map[string]string{
	capInternetClient: "S-1-15-3-1",
	capInternetServer: "S-1-15-3-2",
	capPrivateNetwork: "S-1-15-3-3",
}

// containerSID is the AppContainer SID of name.
func containerSID(name string) (*windows.SID, error) {
	if err := procDeriveAppContainerSid.Find(); err != nil {
		return nil, fmt.Errorf("AppContainers are not available (Windows 8 or later): %w", err)
	}
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	var sid *windows.SID
	hr, _, _ := procDeriveAppContainerSid.Call(uintptr(unsafe.Pointer(n)), uintptr(unsafe.Pointer(&sid)))
	if hr != 0 {
		return nil, fmt.Errorf("DeriveAppContainerSidFromAppContainerName(%s): HRESULT %#x", name, uint32(hr))
	}
	defer windows.FreeSid(sid)
	return sid.Copy()
}

// newCapabilitySID is a capability SID no one else holds: the shape of a
// named capability's (S-1-15-3-1024-…) with 192 random bits.
func newCapabilitySID() (*windows.SID, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	parts := []string{"S-1-15-3-1024"}
	for i := 0; i < len(b); i += 4 {
		parts = append(parts, fmt.Sprint(binary.LittleEndian.Uint32(b[i:])))
	}
	return windows.StringToSid(strings.Join(parts, "-"))
}

// containerStart is what createInContainer needs beyond the command: the
// token the AppContainer is made from (0: toold's own), the run's SID, its
// capabilities, and its Job Object.
type containerStart struct {
	base      windows.Token
	container *windows.SID
	caps      []*windows.SID
	job       windows.Handle
}

// createInContainer starts cmd (Path, Args, Dir, Env, and *os.File
// standard streams, nil stdin reading NUL) as an AppContainer of s, inside
// s.job from its first instruction (PROC_THREAD_ATTRIBUTE_JOB_LIST), with
// only its three standard handles inherited, no console of toold's, and
// sets cmd.Process: exec.Cmd.Wait then waits for it as for one it started.
func createInContainer(cmd *exec.Cmd, s containerStart) error {
	std, closeStd, err := stdHandles(cmd)
	if err != nil {
		return err
	}
	defer closeStd()
	caps := make([]windows.SIDAndAttributes, len(s.caps))
	for i, c := range s.caps {
		caps[i] = windows.SIDAndAttributes{Sid: c, Attributes: windows.SE_GROUP_ENABLED}
	}
	sc := securityCapabilities{AppContainerSid: s.container, CapabilityCount: uint32(len(caps))}
	if len(caps) > 0 {
		sc.Capabilities = &caps[0]
	}
	attrs, err := windows.NewProcThreadAttributeList(3)
	if err != nil {
		return fmt.Errorf("attribute list: %w", err)
	}
	defer attrs.Delete()
	if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&std[0]), uintptr(len(std))*unsafe.Sizeof(std[0])); err != nil {
		return fmt.Errorf("handle list: %w", err)
	}
	if err := attrs.Update(procThreadAttributeSecurityCapabilities, unsafe.Pointer(&sc), unsafe.Sizeof(sc)); err != nil {
		return fmt.Errorf("security capabilities: %w", err)
	}
	jobs := []windows.Handle{s.job}
	if err := attrs.Update(procThreadAttributeJobList, unsafe.Pointer(&jobs[0]), unsafe.Sizeof(jobs[0])); err != nil {
		return fmt.Errorf("job list: %w", err)
	}
	si := windows.StartupInfoEx{ProcThreadAttributeList: attrs.List()}
	si.Cb = uint32(unsafe.Sizeof(si))
	si.Flags = windows.STARTF_USESTDHANDLES
	si.StdInput, si.StdOutput, si.StdErr = std[0], std[1], std[2]
	app, err := windows.UTF16PtrFromString(cmd.Path)
	if err != nil {
		return err
	}
	line, err := windows.UTF16PtrFromString(windows.ComposeCommandLine(cmd.Args))
	if err != nil {
		return err
	}
	var dir *uint16
	if cmd.Dir != "" {
		if dir, err = windows.UTF16PtrFromString(cmd.Dir); err != nil {
			return err
		}
	}
	env, err := envBlock(cmd.Env)
	if err != nil {
		return err
	}
	flags := uint32(windows.EXTENDED_STARTUPINFO_PRESENT | windows.CREATE_UNICODE_ENVIRONMENT | windows.CREATE_SUSPENDED |
		windows.CREATE_NO_WINDOW | windows.CREATE_NEW_PROCESS_GROUP)
	var pi windows.ProcessInformation
	if s.base != 0 {
		err = windows.CreateProcessAsUser(s.base, app, line, nil, nil, true, flags, &env[0], dir, &si.StartupInfo, &pi)
	} else {
		err = windows.CreateProcess(app, line, nil, nil, true, flags, &env[0], dir, &si.StartupInfo, &pi)
	}
	if err != nil {
		return &os.PathError{Op: "fork/exec", Path: cmd.Path, Err: err}
	}
	defer windows.CloseHandle(pi.Thread)
	defer windows.CloseHandle(pi.Process)
	// pi.Process is held open: the pid names this process until then.
	p, err := os.FindProcess(int(pi.ProcessId))
	if err != nil {
		_ = windows.TerminateProcess(pi.Process, 1)
		return fmt.Errorf("opening the run's process: %w", err)
	}
	if _, err := windows.ResumeThread(pi.Thread); err != nil {
		_ = windows.TerminateProcess(pi.Process, 1)
		_ = p.Release()
		return fmt.Errorf("resuming the run: %w", err)
	}
	cmd.Process = p
	return nil
}

// stdHandles are inheritable duplicates of cmd's standard streams (NUL
// for a nil stdin), and what closes them.
func stdHandles(cmd *exec.Cmd) ([]windows.Handle, func(), error) {
	var files [3]*os.File
	var opened *os.File
	for i, s := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		switch f := s.(type) {
		case *os.File:
			files[i] = f
		case nil:
			if i != 0 {
				return nil, nil, errors.New("a job run's stdout and stderr must be files")
			}
			nul, err := os.Open(os.DevNull)
			if err != nil {
				return nil, nil, err
			}
			files[i], opened = nul, nul
		default:
			return nil, nil, fmt.Errorf("a job run's standard streams must be files, not %T", s)
		}
	}
	self := windows.CurrentProcess()
	var out []windows.Handle
	closeAll := func() {
		for _, h := range out {
			_ = windows.CloseHandle(h)
		}
		if opened != nil {
			_ = opened.Close()
		}
	}
	for _, f := range files {
		var dup windows.Handle
		if err := windows.DuplicateHandle(self, windows.Handle(f.Fd()), self, &dup, 0, true, windows.DUPLICATE_SAME_ACCESS); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("duplicating a standard handle: %w", err)
		}
		out = append(out, dup)
	}
	return out, closeAll, nil
}

// envBlock is env as CreateProcess's UTF-16 environment block: sorted by
// name, case folded (as Windows keeps it), each NUL-terminated, then a NUL.
func envBlock(env []string) ([]uint16, error) {
	sorted := append([]string(nil), env...)
	sort.SliceStable(sorted, func(i, j int) bool {
		ki, _, _ := strings.Cut(sorted[i], "=")
		kj, _, _ := strings.Cut(sorted[j], "=")
		return strings.ToUpper(ki) < strings.ToUpper(kj)
	})
	var b []uint16
	for _, kv := range sorted {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("environment variable %q holds a NUL", kv)
		}
		b = append(b, utf16.Encode([]rune(kv))...)
		b = append(b, 0)
	}
	if len(b) == 0 {
		b = append(b, 0)
	}
	return append(b, 0), nil
}

// fileGrant applies one ACE of a plan to path for sid (SetEntriesInAcl
// merged into the path's DACL, then SetNamedSecurityInfo, which carries
// an inherited ACE down to what a directory holds).
func fileGrant(path string, sid *windows.SID, g jobGrant) error {
	mode := windows.GRANT_ACCESS
	if g.Deny {
		mode = windows.DENY_ACCESS
	}
	inherit := uint32(windows.NO_INHERITANCE)
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() && g.Inherit {
		inherit = windows.SUB_CONTAINERS_AND_OBJECTS_INHERIT
	}
	return setEntry(path, windows.EXPLICIT_ACCESS{AccessPermissions: windows.ACCESS_MASK(g.Access),
		AccessMode: windows.ACCESS_MODE(mode), Inheritance: inherit, Trustee: sidTrustee(sid)})
}

// fileRevoke removes every explicit ACE of sid from path.
func fileRevoke(path string, sid *windows.SID) error {
	return setEntry(path, windows.EXPLICIT_ACCESS{AccessMode: windows.REVOKE_ACCESS, Trustee: sidTrustee(sid)})
}

func sidTrustee(sid *windows.SID) windows.TRUSTEE {
	return windows.TRUSTEE{TrusteeForm: windows.TRUSTEE_IS_SID, TrusteeType: windows.TRUSTEE_IS_WELL_KNOWN_GROUP,
		TrusteeValue: windows.TrusteeValueFromSID(sid)}
}

func setEntry(path string, e windows.EXPLICIT_ACCESS) error {
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("reading the ACL of %s: %w", path, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("reading the ACL of %s: %w", path, err)
	}
	acl, err := windows.ACLFromEntries([]windows.EXPLICIT_ACCESS{e}, dacl)
	if err != nil {
		return fmt.Errorf("merging an ACE into the ACL of %s: %w", path, err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION, nil, nil, acl, nil); err != nil {
		return fmt.Errorf("setting the ACL of %s: %w", path, err)
	}
	return nil
}

// fileID is the identity of the file at path (not followed), which a
// rename keeps and a file made again does not have; ok is false when there
// is no file.
func fileID(path string) (id [3]uint32, ok bool) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return id, false
	}
	h, err := windows.CreateFile(p, windows.FILE_READ_ATTRIBUTES, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return id, false
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return id, false
	}
	return [3]uint32{info.VolumeSerialNumber, info.FileIndexHigh, info.FileIndexLow}, true
}

// createRestrictedToken is advapi32's CreateRestrictedToken (x/sys has no
// wrapper).
var createRestrictedToken = windows.NewLazySystemDLL("advapi32.dll").NewProc("CreateRestrictedToken")

// Flags of CreateRestrictedToken.
const (
	disableMaxPrivilege = 0x1
	luaToken            = 0x4
)

// jobDenyOnlySIDs are jobDenyOnly's well-known SIDs.
var jobDenyOnlySIDs = []windows.WELL_KNOWN_SID_TYPE{windows.WinBuiltinAdministratorsSid,
	windows.WinBuiltinPowerUsersSid, windows.WinBuiltinBackupOperatorsSid, windows.WinLocalAccountAndAdministratorSid}

// restrictedToken is toold's token with every privilege removed but
// SeChangeNotifyPrivilege and the privileged groups for denial only: the
// token each run's AppContainer is made from.
func restrictedToken() (windows.Token, error) {
	var own windows.Token
	if err := windows.OpenProcessToken(windows.CurrentProcess(),
		windows.TOKEN_DUPLICATE|windows.TOKEN_QUERY|windows.TOKEN_ASSIGN_PRIMARY|windows.TOKEN_ADJUST_DEFAULT, &own); err != nil {
		return 0, fmt.Errorf("opening toold's token: %w", err)
	}
	defer own.Close()
	var disable []windows.SIDAndAttributes
	for _, t := range jobDenyOnlySIDs {
		if sid, err := windows.CreateWellKnownSid(t); err == nil {
			disable = append(disable, windows.SIDAndAttributes{Sid: sid})
		}
	}
	var tok windows.Token
	r, _, err := createRestrictedToken.Call(uintptr(own), disableMaxPrivilege|luaToken,
		uintptr(len(disable)), uintptr(unsafe.Pointer(unsafe.SliceData(disable))), 0, 0, 0, 0, uintptr(unsafe.Pointer(&tok)))
	if r == 0 {
		return 0, fmt.Errorf("CreateRestrictedToken: %w", err)
	}
	return tok, nil
}
