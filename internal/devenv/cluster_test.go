package devenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDownRemovesOnlyWhatBerthMade: a state folder that also holds a
// user's files (berth dev up --dir pointed at a folder in use, then
// stopped). Destroy removes what berth dev made there and leaves the
// user's files, and the folder with them; a folder left empty goes.
// Before, it removed the whole folder.
func TestDownRemovesOnlyWhatBerthMade(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"logs/etcd.log", "pki/ca.crt", "kubeconfig", "etcd/member/x"} {
		write(t, filepath.Join(dir, p))
	}
	c := &Cluster{Dir: dir}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "important.txt")
	write(t, mine)
	write(t, filepath.Join(dir, "src", "main.go"))
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Destroy(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("the folder with the user's files is gone: %v", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "important.txt,src" {
		t.Errorf("after down the folder holds %v, want only the user's important.txt and src", names)
	}

	empty := t.TempDir()
	write(t, filepath.Join(empty, "logs", "etcd.log"))
	if err := (&Cluster{Dir: empty}).save(); err != nil {
		t.Fatal(err)
	}
	if err := (&Cluster{Dir: empty}).Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("a folder holding only berth dev's state is still there after down: %v", err)
	}
}

// TestUpRefusesAFolderOfOtherFiles: berth dev up in a folder that holds
// files it did not make (a checkout) refuses before it writes anything,
// so that a later down has nothing of the user's to remove.
func TestUpRefusesAFolderOfOtherFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"))
	_, err := Start(context.Background(), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Fatalf("Start in a folder holding go.mod = %v, want a refusal naming it", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pki")); !os.IsNotExist(err) {
		t.Errorf("Start wrote its state into the refused folder: %v", err)
	}
}

func write(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
