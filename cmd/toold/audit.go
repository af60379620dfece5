package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/events"
)

// runAudit is `toold audit verify|export`: it reads the audit log from the
// store the configuration names (the embedded one's directory must not be
// in use: stop toold, or give the embedded server a state.nats.listen
// address and pass -nats-url), or checks an export file.
func runAudit(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) error {
	usage := "usage: toold audit verify [-config FILE] [-state-dir DIR] [-nats-url URL] [-file EXPORT.jsonl]\n" +
		"       toold audit export [-config FILE] [-state-dir DIR] [-nats-url URL] [-o FILE]"
	if len(args) == 0 || (args[0] != "verify" && args[0] != "export") {
		fmt.Fprintln(stderr, usage)
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
	out := fs.String("o", "", "write the export to this `file` instead of stdout")
	if err := fs.Parse(args[1:]); err != nil {
		return exitCode(2)
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if cmd == "verify" && *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		v, err := events.VerifyFile(f)
		if err != nil {
			return err
		}
		return report(v, *file, stdout)
	}
	cfg, err := loadConfig(o, lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "toold: the configuration has problems:\n%v\n", err)
		return exitCode(2)
	}
	cfg.State.Replica = "toold-audit"
	st, err := openState(cfg, zap.NewNop(), nil)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if cmd == "verify" {
		v, err := events.Verify(ctx, st)
		if err != nil {
			return err
		}
		return report(v, "the audit log", stdout)
	}
	w := stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
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

// report prints a verification; problems make the exit status 1.
func report(v *events.Verification, what string, stdout io.Writer) error {
	for _, p := range v.Problems {
		fmt.Fprintln(stdout, "PROBLEM:", p)
	}
	switch {
	case v.Records == 0 && v.OK():
		fmt.Fprintf(stdout, "%s holds no records\n", what)
	case v.OK():
		fmt.Fprintf(stdout, "%s: %d records (%d to %d) chain intact; head %s\n", what, v.Records, v.First, v.Last, v.Head)
		if v.First > 1 {
			fmt.Fprintf(stdout, "records before %d were removed by the log's retention limits\n", v.First)
		}
	default:
		fmt.Fprintf(stdout, "%s: %d records checked, %d problem(s): the log was altered or records were removed\n", what, v.Records, len(v.Problems))
		return exitCode(1)
	}
	return nil
}
