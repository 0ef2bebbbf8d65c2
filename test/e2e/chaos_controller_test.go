package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// chaosController runs `berth controller` through the chaos proxy, kills
// it (SIGKILL) at random moments and starts it again; a controller that
// exits by itself is started again too.
type chaosController struct {
	kubeconfig string
	args       []string
	dir        string
	killEvery  [2]time.Duration
	maxKills   int // 0: no limit
	drainNow   func() bool

	mu               sync.Mutex
	rng              *mrand.Rand
	starts, kills    int
	killsDuringDrain int
	exits            []string // the last log line of each controller that exited by itself
	logs             []string
	cancel           context.CancelFunc
	done             chan struct{}
}

// start runs the supervisor until stop.
func (c *chaosController) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go c.run(ctx)
}

// stop ends the controller gracefully and the supervisor with it.
func (c *chaosController) stop() {
	c.cancel()
	<-c.done
}

func (c *chaosController) between(d [2]time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return d[0] + time.Duration(c.rng.Int64N(int64(d[1]-d[0])+1))
}

func (c *chaosController) run(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		cmd, done, log, err := c.launch()
		if err != nil {
			c.note("start failed: " + err.Error())
			sleepCtx(ctx, time.Second)
			continue
		}
		timer := time.NewTimer(c.between(c.killEvery))
		if c.maxKills > 0 && c.killCount() >= c.maxKills {
			timer.Stop() // no more kills: run until stopped or exited
		}
		select {
		case <-done:
			c.note(lastLine(log))
			sleepCtx(ctx, time.Second)
		case <-timer.C:
			draining := c.drainNow()
			_ = cmd.Process.Kill()
			<-done
			c.mu.Lock()
			c.kills++
			if draining {
				c.killsDuringDrain++
			}
			c.mu.Unlock()
			sleepCtx(ctx, c.between([2]time.Duration{0, 2 * time.Second}))
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(40 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		timer.Stop()
	}
}

func (c *chaosController) killCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kills
}

func (c *chaosController) note(exit string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exits = append(c.exits, exit)
}

// launch starts one controller; done closes when it has exited. Metrics,
// probes and the webhook are off: no ports to collide across restarts.
func (c *chaosController) launch() (*exec.Cmd, chan struct{}, string, error) {
	c.mu.Lock()
	c.starts++
	log := filepath.Join(c.dir, fmt.Sprintf("controller-%02d.log", c.starts))
	c.logs = append(c.logs, log)
	c.mu.Unlock()
	f, err := os.Create(log)
	if err != nil {
		return nil, nil, "", err
	}
	cmd := exec.Command(berthBin, append([]string{"controller", "--kubeconfig", c.kubeconfig, "--metrics-bind-address", "0",
		"--metrics-secure=false", "--health-probe-bind-address", "0", "--webhook-bind-address", "0"}, c.args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, nil, "", err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	return cmd, done, log, nil
}

func lastLine(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[len(lines)-1]
}

// logFigures counts what the controllers' logs say they did, and the most
// frequent error messages.
type logFigures struct {
	launched, removed, drains, drainsStopped, errors, panics int
	topErrors                                                []string
}

func (c *chaosController) logFigures() logFigures {
	c.mu.Lock()
	logs := append([]string(nil), c.logs...)
	c.mu.Unlock()
	var f logFigures
	errs := map[string]int{}
	for _, path := range logs {
		file, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var entry struct{ Level, Msg, Error string }
			_ = json.Unmarshal([]byte(line), &entry)
			switch {
			case strings.HasPrefix(line, "panic:") || strings.Contains(line, "Observed a panic"):
				f.panics++
			case entry.Msg == "launched node":
				f.launched++
			case entry.Msg == "removed node":
				f.removed++
			case entry.Msg == "draining node to remove it":
				f.drains++
			case entry.Msg == "drain stopped; node stays":
				f.drainsStopped++
			}
			if entry.Level == "error" {
				f.errors++
				errs[entry.Msg+": "+shorten(entry.Error)]++
			}
		}
		_ = file.Close()
	}
	for msg, n := range errs {
		f.topErrors = append(f.topErrors, fmt.Sprintf("%4d x %s", n, msg))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(f.topErrors)))
	if len(f.topErrors) > 8 {
		f.topErrors = f.topErrors[:8]
	}
	return f
}

// generatedSuffix is the random part of a generated node or pod name.
var generatedSuffix = regexp.MustCompile(`-[bcdfghjklmnpqrstvwxz2456789]{5}\b|-[0-9a-f]{8,10}-`)

// shorten keeps an error's first 160 characters, with the random parts
// of names starred so that the same error counts once.
func shorten(s string) string {
	s = generatedSuffix.ReplaceAllString(s, "-*")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func (c *chaosController) figures() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	exits := map[string]int{}
	for _, e := range c.exits {
		exits[shorten(e)]++
	}
	var reasons []string
	for e, n := range exits {
		reasons = append(reasons, strconv.Itoa(n)+" x "+e)
	}
	sort.Strings(reasons)
	return fmt.Sprintf("controller: %d starts, %d kills (%d during a drain), %d exits on its own%s",
		c.starts, c.kills, c.killsDuringDrain, len(c.exits), strings.Join(append([]string{""}, reasons...), "\n    "))
}
