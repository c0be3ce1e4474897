package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Command is one subcommand.
type Command struct {
	// Name on the command line.
	Name string
	// Short is the one-line summary of the command list.
	Short string
	// Long is the help text above the flags.
	Long string
	// Flags registers the command's flags and returns what runs it.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, out io.Writer) error
}

// Main is a provider binary's main function: it runs the subcommand the command line
// names, out of p's [Commands] and extra (for example local.Command(p), which a binary
// for a platform leaves out), and exits with [Execute]'s code.
func Main(p Provider, extra ...*Command) {
	os.Exit(Execute(os.Args[0], os.Args[1:], os.Stdout, os.Stderr, append(Commands(p), extra...)...))
}

// Commands are the commands of a provider binary: init and run, as the
// openmcp-operator calls them, kcp-manifests and platform-rbac, and rollback-cleanup
// for a provider that declares a migration.
func Commands(p Provider) []*Command {
	cmds := []*Command{InitCommand(p), RunCommand(p), KCPManifestsCommand(p), PlatformRBACCommand(p)}
	if p.Migration != nil {
		cmds = append(cmds, RollbackCleanupCommand(p))
	}
	return cmds
}

// Execute runs the subcommand named by args[0] and returns the exit code: 0 on success
// (and for --help), 2 for usage errors, 1 when the command failed.
func Execute(prog string, args []string, stdout, stderr io.Writer, commands ...*Command) int {
	prog = baseName(prog)
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: %s <command> [flags]\n\n", prog)
		fmt.Fprintf(w, "An openMCP service provider on the kcp-aware runtime.\n\nCommands:\n")
		for _, c := range commands {
			fmt.Fprintf(w, "  %-16s %s\n", c.Name, c.Short)
		}
		fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags.\n%s", prog, envHelp)
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	var cmd *Command
	for _, c := range commands {
		if c.Name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", prog, args[0])
		usage(stderr)
		return 2
	}
	fs := flag.NewFlagSet(prog+" "+cmd.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	run := cmd.Flags(fs)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s %s [flags]\n\n%s\n\nFlags:\n", prog, cmd.Name, strings.TrimSpace(cmd.Long))
		fs.PrintDefaults()
		fmt.Fprint(w, envHelp)
	}
	// Asked-for help goes to stdout and exits 0; usage after a mistake goes to stderr.
	if wantsHelp(args[1:]) {
		fs.SetOutput(stdout)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s %s: unexpected arguments %q\n", prog, cmd.Name, fs.Args())
		return 2
	}
	// SIGTERM is how Kubernetes stops a pod, SIGINT how a terminal does: both end the
	// command's context, and the command shuts down in order.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, cmd.Name, err)
		return 1
	}
	return 0
}

// wantsHelp says whether the flags ask for help (before a "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "-h=true", "-help=true", "--help=true":
			return true
		}
	}
	return false
}

func baseName(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

const envHelp = `
Environment:
  POD_NAMESPACE                       the provider's namespace on the platform cluster (set by the
                                      openmcp-operator); default of --namespace
  OPENMCP_PLATFORM_CLUSTER_NAMESPACE  fallback for POD_NAMESPACE
  OPENMCP_PROVIDER_NAME               default of --provider-name
  POD_NAME, POD_IP, POD_SERVICE_ACCOUNT_NAME
                                      logged at start-up, to tell replicas apart
  KUBECONFIG                          platform cluster when not in a pod and --platform-kubeconfig is unset
  KSP_TEST_ASSETS                     (local) folder with kcp, kube-apiserver, etcd and kubectl
`
