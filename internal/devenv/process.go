package devenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one started component, as recorded in the state file.
type Process struct {
	Name    string   `json:"name"`
	Binary  string   `json:"binary"`
	Args    []string `json:"args"`
	LogFile string   `json:"logFile"`
	PID     int      `json:"pid"`
	// StartTicks is the process start time from /proc/<pid>/stat. Together
	// with the PID it identifies the process, so that a PID reused by the
	// system after the component died is never signalled.
	StartTicks uint64 `json:"startTicks"`
	// Health is the URL that answers 200 when the component is healthy.
	Health string `json:"health"`

	// exited is closed when a process started by this program (not
	// detached) has been reaped.
	exited chan struct{}
}

// start launches the process with its output in its log file. A detached
// process gets its own session and outlives this program (berth dev up);
// otherwise it is killed when this program dies (tests).
func (p *Process) start(detach bool) error {
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.PID = cmd.Process.Pid
	p.StartTicks, _ = startTicks(p.PID)
	if detach {
		return cmd.Process.Release()
	}
	p.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return nil
}

// Alive reports whether the recorded process still runs (and is the same
// process, not a reused PID).
func (p *Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
		}
	}
	ticks, err := startTicks(p.PID)
	if err != nil {
		return false
	}
	return p.StartTicks == 0 || ticks == p.StartTicks
}

// stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL and waits for the process to go.
func (p *Process) stop(grace time.Duration) error {
	if !p.Alive() {
		return nil
	}
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if p.waitGone(grace) {
		return nil
	}
	_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if p.waitGone(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID)
}

func (p *Process) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !p.Alive()
}

// startTicks reads the start time of a live process from /proc. A zombie
// counts as gone.
func startTicks(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields after the
	// closing parenthesis are space separated: state is field 3, start time
	// field 22.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, errors.New("malformed stat")
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, errors.New("zombie")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
