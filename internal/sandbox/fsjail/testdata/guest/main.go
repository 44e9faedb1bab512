//go:build wasip1

// Command guest is the WASI program of fsjail's end-to-end test. Each
// command-line argument is one filesystem operation, "op|arg|arg...", and
// produces one output line: "<index> OK <result>" or "<index> ERR <error>".
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	for i, arg := range os.Args[1:] {
		op, args, _ := strings.Cut(arg, "|")
		out, err := run(op, strings.Split(args, "|"))
		if err != nil {
			fmt.Printf("%d ERR %v\n", i, err)
			continue
		}
		fmt.Printf("%d OK %s\n", i, out)
	}
}

func run(op string, a []string) (string, error) {
	need := map[string]int{
		"read": 1, "write": 2, "append": 2, "mkdir": 1, "remove": 1,
		"rename": 2, "symlink": 2, "link": 2, "readlink": 1, "stat": 1,
		"lstat": 1, "readdir": 1, "chtimes": 1, "truncate": 1,
		"truncate-to": 2, "pwrite": 3, "create-many": 2, "write-size": 2,
	}
	n, ok := need[op]
	if !ok {
		return "", fmt.Errorf("unknown op %q", op)
	}
	if len(a) != n {
		return "", fmt.Errorf("%s wants %d arguments, got %d", op, n, len(a))
	}
	switch op {
	case "read":
		b, err := os.ReadFile(a[0])
		return fmt.Sprintf("%q", b), err
	case "write":
		return "", os.WriteFile(a[0], []byte(a[1]), 0o644)
	case "append":
		f, err := os.OpenFile(a[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(a[1])
		return "", errors.Join(err, f.Close())
	case "mkdir":
		return "", os.Mkdir(a[0], 0o755)
	case "remove":
		return "", os.Remove(a[0])
	case "rename":
		return "", os.Rename(a[0], a[1])
	case "symlink":
		return "", os.Symlink(a[0], a[1])
	case "link":
		return "", os.Link(a[0], a[1])
	case "readlink":
		return os.Readlink(a[0])
	case "stat", "lstat":
		stat := os.Stat
		if op == "lstat" {
			stat = os.Lstat
		}
		fi, err := stat(a[0])
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %d", fi.Mode().Type(), fi.Size()), nil
	case "readdir":
		entries, err := os.ReadDir(a[0])
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name()+typeSuffix(e.Type()))
		}
		slices.Sort(names)
		return strings.Join(names, ","), err
	case "chtimes":
		t := time.Unix(1_000_000_000, 0)
		return "", os.Chtimes(a[0], t, t)
	case "truncate":
		return "", os.Truncate(a[0], 0)
	case "truncate-to": // path|size
		size, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return "", err
		}
		return "", os.Truncate(a[0], size)
	case "pwrite": // path|offset|data, creating the file
		off, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return "", err
		}
		f, err := os.OpenFile(a[0], os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return "", err
		}
		_, err = f.WriteAt([]byte(a[2]), off)
		return "", errors.Join(err, f.Close())
	case "create-many": // dir|n: create files dir/f0... until n or an error
		n, err := strconv.Atoi(a[1])
		if err != nil {
			return "", err
		}
		for i := range n {
			f, err := os.Create(fmt.Sprintf("%s/f%d", a[0], i))
			if err != nil {
				return strconv.Itoa(i), err
			}
			f.Close()
		}
		return a[1], nil
	case "write-size": // path|n: write n bytes in 1 MiB writes, reporting how many went
		n, err := strconv.ParseInt(a[1], 10, 64)
		if err != nil {
			return "", err
		}
		f, err := os.Create(a[0])
		if err != nil {
			return "", err
		}
		defer f.Close()
		chunk := make([]byte, 1<<20)
		var done int64
		for done < n {
			m, err := f.Write(chunk[:min(int64(len(chunk)), n-done)])
			done += int64(m)
			if err != nil {
				return strconv.FormatInt(done, 10), err
			}
		}
		return strconv.FormatInt(done, 10), nil
	}
	return "", fmt.Errorf("unhandled op %q", op)
}

func typeSuffix(t fs.FileMode) string {
	switch {
	case t&fs.ModeDir != 0:
		return "/"
	case t&fs.ModeSymlink != 0:
		return "@"
	}
	return ""
}
