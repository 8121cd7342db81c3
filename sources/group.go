package sources

import (
	"context"
	"crypto/rand"
	"errors"
	"os/exec"
)

// GroupCmd is a command that runs as an exec poll's does (NewExec): in its
// own process group, tagged with a PACER_POLL_ID unique to it, the whole
// group killed with SIGKILL when its context is done and, whatever its
// outcome, once its process has exited (with the tagged descendants that
// left the group, when the daemon is a subreaper). The deliver command of
// contract 9.4 runs this way.
type GroupCmd struct {
	*exec.Cmd
	tag string
}

// NewGroupCmd returns the command argv (argv[0] resolved, no shell) with
// environment env, bound to ctx. Set Dir, Stdin, Stdout and Stderr on it,
// then call Run.
func NewGroupCmd(ctx context.Context, argv, env []string) (*GroupCmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("empty command")
	}
	tag := envTag + "=" + rand.Text()
	return &GroupCmd{Cmd: groupCommand(ctx, argv, env, tag), tag: tag}, nil
}

// Run starts the command and waits for it, killing what it leaves behind.
func (c *GroupCmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return wait(c.Cmd, c.tag)
}

// Wait waits for a started command, killing what it leaves behind.
func (c *GroupCmd) Wait() error { return wait(c.Cmd, c.tag) }
