package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/state"
)

const auditUsage = "usage: toold audit verify [-config FILE] [-state-dir DIR] [-nats-url URL] [-file EXPORT.jsonl]\n" +
	"                         [-public-key KEY]... [-checkpoint SEQ:HASH]... [-checkpoint-file FILE]\n" +
	"       toold audit export [-config FILE] [-state-dir DIR] [-nats-url URL] [-o FILE]\n" +
	"       toold audit keygen [-o FILE]\n" +
	"       toold audit public-key [-config FILE] [-state-dir DIR]"

// runAudit is `toold audit verify|export|keygen|public-key`: it reads the
// audit log from the store the configuration names (the embedded one's
// directory must not be in use: stop toold, or give the embedded server a
// state.nats.listen address and pass -nats-url), or checks an export file;
// it makes and shows the key the log is signed with.
func runAudit(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	if len(args) == 0 || !strings.Contains(" verify export keygen public-key ", " "+args[0]+" ") {
		fmt.Fprintln(stderr, auditUsage)
		return exitCode(2)
	}
	cmd := args[0]
	fs := flag.NewFlagSet("toold audit "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{set: map[string]bool{}}
	storeFlags(fs, o)
	// Before this command's own flags: TOOLD_FILE or TOOLD_O must not
	// choose what it reads or writes.
	if err := envDefaults(fs, o, lookupEnv); err != nil {
		fmt.Fprintln(stderr, "toold:", err)
		return exitCode(2)
	}
	file := fs.String("file", "", "verify this export (JSON Lines) instead of the store")
	out := fs.String("o", "", "write to this `file` instead of stdout")
	var keys, checkpoints listFlag
	fs.Var(&keys, "public-key", "trust this public `key` (\"ed25519:<hex>\" or a file; repeatable)")
	fs.Var(&checkpoints, "checkpoint", "check the log against this `checkpoint` (SEQ:HASH, from the log line or the metrics; repeatable)")
	cpFile := fs.String("checkpoint-file", "", "check the log against every checkpoint in this `file` (state.audit.checkpoint_file)")
	if err := fs.Parse(args[1:]); err != nil {
		return exitCode(2)
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if cmd == "keygen" {
		return keygen(*out, stdout, stderr)
	}
	cfg, err := loadConfig(o, lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "toold: the configuration has problems:\n%v\n", err)
		return exitCode(2)
	}
	switch cmd {
	case "public-key":
		return publicKey(cfg, lookupEnv, stdout)
	case "verify":
		vo, err := verifyOptions(cfg, lookupEnv, keys, checkpoints, *cpFile)
		if err != nil {
			return err
		}
		if *file != "" {
			return verifyFile(*file, vo, stdout)
		}
		return withStore(ctx, cfg, func(ctx context.Context, st *state.Store) error {
			v, err := events.Verify(ctx, st, vo)
			if err != nil {
				return err
			}
			return report(v, "the audit log", stdout)
		})
	}
	return withStore(ctx, cfg, func(ctx context.Context, st *state.Store) error {
		return export(ctx, st, *out, stdout, stderr)
	})
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// verifyOptions gathers the keys verify trusts and the checkpoints it
// checks against.
func verifyOptions(cfg *config.Config, lookupEnv func(string) (string, bool), keys, checkpoints []string, cpFile string) (events.VerifyOptions, error) {
	var vo events.VerifyOptions
	signer, _ := configuredSigner(cfg, lookupEnv) // verify can do with public keys alone
	// No key at all is not an error yet: an empty log needs none, and
	// a signed one says which key it lacks.
	k, err := auditKeyring(cfg, signer, keys)
	if err != nil {
		return vo, err
	}
	vo.Keys = k
	for _, s := range checkpoints {
		c, err := events.ParseCheckpoint(s)
		if err != nil {
			return vo, fmt.Errorf("-checkpoint: %w", err)
		}
		vo.Checkpoints = append(vo.Checkpoints, c)
	}
	if cpFile != "" {
		cps, err := readCheckpoints(cpFile)
		if err != nil {
			return vo, err
		}
		vo.Checkpoints = append(vo.Checkpoints, cps...)
	}
	return vo, nil
}

// configuredSigner is the signing key as the server finds it, never made.
func configuredSigner(cfg *config.Config, lookupEnv func(string) (string, bool)) (*events.Signer, error) {
	dir, err := stateDir(cfg)
	if err != nil {
		return nil, err
	}
	s, _, err := auditSigner(cfg, dir, lookupEnv, false)
	return s, err
}

// readCheckpoints reads a checkpoint file: one checkpoint a line.
func readCheckpoints(file string) ([]events.Checkpoint, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cps []events.Checkpoint
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		c, err := events.ParseCheckpoint(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		cps = append(cps, c)
	}
	return cps, sc.Err()
}

func verifyFile(file string, vo events.VerifyOptions, stdout io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	v, err := events.VerifyFile(f, vo)
	if err != nil {
		return err
	}
	return report(v, file, stdout)
}

// withStore opens the store the configuration names for the length of fn.
func withStore(ctx context.Context, cfg *config.Config, fn func(context.Context, *state.Store) error) error {
	cfg.State.Replica = "toold-audit"
	st, err := openState(cfg, zap.NewNop(), nil, true)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	return fn(ctx, st)
}

func export(ctx context.Context, st *state.Store, out string, stdout, stderr io.Writer) error {
	w := stdout
	if out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	n, err := events.Export(ctx, st, w)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d audit records\n", n)
	return nil
}

// keygen makes a signing key: into a file (and its public key beside it,
// FILE.pub), or onto stdout for a secret store.
func keygen(out string, stdout, stderr io.Writer) error {
	s := events.GenerateSigner()
	pub := events.MarshalPublicKey(s.PublicKey())
	if out == "" {
		stdout.Write(s.MarshalPrivateKey())
	} else if err := writeKeyPair(out, out+".pub", s); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "public key: %s (key id %s)\n", pub, s.KeyID())
	return nil
}

// publicKey prints the public half of the key the server signs with.
func publicKey(cfg *config.Config, lookupEnv func(string) (string, bool), stdout io.Writer) error {
	s, err := configuredSigner(cfg, lookupEnv)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", events.MarshalPublicKey(s.PublicKey()))
	return nil
}

// report prints a verification; problems make the exit status 1.
func report(v *events.Verification, what string, stdout io.Writer) error {
	for _, p := range v.Problems {
		fmt.Fprintln(stdout, "PROBLEM:", p)
	}
	for _, n := range v.Notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	switch {
	case v.Records == 0 && v.OK():
		fmt.Fprintf(stdout, "%s holds no records\n", what)
	case v.OK():
		fmt.Fprintf(stdout, "%s: %d records (%d to %d) chain intact, %d signature(s) valid (key %s), %d checkpoint(s) matched; head %d:%s\n",
			what, v.Records, v.First, v.Last, v.Signed, strings.Join(v.Keys, ", "), v.Checkpoints, v.Last, v.Head)
		if v.First > 1 {
			fmt.Fprintf(stdout, "records before %d were removed by the log's retention limits\n", v.First)
		}
	default:
		fmt.Fprintf(stdout, "%s: %d records checked, %d problem(s): the log was altered or records were removed\n", what, v.Records, len(v.Problems))
		return exitCode(1)
	}
	return nil
}
