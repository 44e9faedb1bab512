//go:build wasip1

package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
)

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}

func init() {
	register("fs-dotdot", fsDotdot)
	register("fs-absolute", fsAbsolute)
	register("fs-symlink-relative", fsSymlinkRelative)
	register("fs-symlink-absolute", fsSymlinkAbsolute)
	register("fs-symlinked-dir", fsSymlinkedDir)
	register("fs-hardlink", fsHardlink)
	register("fs-swap", fsSwap)
	register("fs-read-loop", fsReadLoop)
	register("fs-write-ro", fsWriteRO)
	register("fs-proc-self", fsProcSelf)
	register("fs-mutate-outside", fsMutateOutside)
	register("fs-symlink-loop", fsSymlinkLoop)
	register("fs-fd-exhaustion", fsFDExhaustion)
	register("fs-read", fsRead)
	register("fs-special", fsSpecial)
	register("fs-sparse", fsSparse)
	register("fs-many-files", fsManyFiles)
	register("fs-nested-ro", fsNestedRO)
}

// control records a legitimate call through the same descriptor, which
// must succeed: without it a refusal could be the descriptor's, not the
// jail's.
func control(r *report, fd int32) {
	d, err := rawRead(fd, "hello.txt")
	r.fs("control: read hello.txt through the descriptor", d, err)
}

func fsDotdot(a args, r *report) error {
	fd, err := dirFD(a.WS)
	if err != nil {
		return err
	}
	control(r, fd)
	secret := a.Rel + "/secret.txt"
	d, err := rawRead(fd, secret)
	r.fs("openat ../", d, err)
	// wazero refuses a lexical ".." before the jail sees it; symlinks to
	// ".." reach the jail, which must refuse to climb through them.
	out := path.Base(a.Outside)
	r.fs("symlink up -> ..", "", rawSymlink("..", fd, "up"))
	r.fs("symlink sub/upup -> ../..", "", rawSymlink("../..", fd, "sub/upup"))
	d, err = rawRead(fd, "up/"+out+"/secret.txt")
	r.fs("openat up/NAME/secret.txt", d, err)
	d, err = rawRead(fd, "sub/upup/"+out+"/secret.txt")
	r.fs("openat sub/upup/NAME/secret.txt", d, err)
	d, err = rawRead(fd, "sub/../up/"+out+"/sub/deep.txt")
	r.fs("openat sub/../up/NAME/sub/deep.txt", d, err)
	r.fs("stat up/NAME/secret.txt", "", rawStat(fd, "up/"+out+"/secret.txt"))
	d, err = rawRead(fd, "up/ws/hello.txt")
	r.fs("openat up/ws/hello.txt (out and back in)", d, err)
	deep := strings.Repeat("../", 40) + strings.TrimPrefix(a.Outside, "/") + "/secret.txt"
	d, err = rawRead(fd, deep)
	r.fs("openat deep ../ chain", d, err)
	d, err = rawRead(fd, "sub/../../"+path.Base(a.Outside)+"/secret.txt")
	r.fs("openat sub/../../", d, err)
	r.fs("stat ../", "", rawStat(fd, secret))
	f, err := rawOpen(fd, "..", oDirectory, true)
	names := ""
	if err == nil {
		list, _ := f.ReadDir(-1)
		for _, e := range list {
			names += e.Name() + " "
		}
		f.Close()
	}
	r.fs("opendir ..", names, err)
	d, err = readFile(a.WS + "/../" + path.Base(a.Outside) + "/secret.txt")
	r.fs("os.ReadFile ws/../", d, err)
	return nil
}

func fsAbsolute(a args, r *report) error {
	fd, err := dirFD(a.WS)
	if err != nil {
		return err
	}
	control(r, fd)
	d, err := readFile(a.WS + "/hello.txt")
	r.fs("control: os.ReadFile ws/hello.txt", d, err)
	d, err = rawRead(fd, a.Outside+"/secret.txt")
	r.fs("openat absolute", d, err)
	r.fs("stat absolute", "", rawStat(fd, a.Outside+"/secret.txt"))
	d, err = readFile(a.Outside + "/secret.txt")
	r.fs("os.ReadFile absolute", d, err)
	_, err = os.ReadDir("/")
	r.fs("os.ReadDir /", "", err)
	return nil
}

func fsSymlinkRelative(a args, r *report) error {
	// wazero #2321: a relative symlink created by the guest, read back.
	target := strings.Repeat("../", 1) + path.Base(a.Outside) + "/secret.txt"
	link := a.WS + "/rel-link"
	r.fs("symlink ../NAME/secret.txt", "", os.Symlink(target, link))
	got, err := os.Readlink(link)
	r.fs("readlink", got, err)
	d, err := readFile(link)
	r.fs("read through the link", d, err)
	deep := strings.Repeat("../", 30) + strings.TrimPrefix(a.Outside, "/") + "/secret.txt"
	r.fs("symlink deep ../", "", os.Symlink(deep, a.WS+"/deep-link"))
	d, err = readFile(a.WS + "/deep-link")
	r.fs("read through the deep link", d, err)
	err = os.WriteFile(link, []byte("overwrite"), 0o644)
	r.fs("write through the link", "", err)
	r.fs("control: symlink sub/in-link -> ../hello.txt", "", os.Symlink("../hello.txt", a.WS+"/sub/in-link"))
	d, err = readFile(a.WS + "/sub/in-link")
	r.fs("control: read through sub/in-link", d, err)
	return nil
}

func fsSymlinkAbsolute(a args, r *report) error {
	r.fs("control: symlink relative target", "", os.Symlink("hello.txt", a.WS+"/rel-in-link"))
	d, err := readFile(a.WS + "/rel-in-link")
	r.fs("control: read the relative link", d, err)
	r.fs("symlink absolute target", "", os.Symlink(a.Outside+"/secret.txt", a.WS+"/abs-link"))
	d, err = readFile(a.WS + "/abs-link")
	r.fs("read the guest's absolute link", d, err)
	// The host placed this one: an absolute symlink inside the root.
	d, err = readFile(a.WS + "/host-abs-link")
	r.fs("read the host's absolute link", d, err)
	return nil
}

func fsSymlinkedDir(a args, r *report) error {
	dl := a.WS + "/dir-link"
	r.fs("symlink ../NAME", "", os.Symlink("../"+path.Base(a.Outside), dl))
	d, err := readFile(dl + "/secret.txt")
	r.fs("read dir-link/secret.txt", d, err)
	list, err := os.ReadDir(dl)
	names := ""
	for _, e := range list {
		names += e.Name() + " "
	}
	r.fs("list dir-link", names, err)
	_, err = os.Stat(dl + "/secret.txt")
	r.fs("stat dir-link/secret.txt", "", err)
	r.fs("create dir-link/planted.txt", "", os.WriteFile(dl+"/planted.txt", []byte("planted"), 0o644))
	// The host placed ws/host-dir-link -> outside (absolute).
	d, err = readFile(a.WS + "/host-dir-link/secret.txt")
	r.fs("read host-dir-link/secret.txt", d, err)
	r.fs("control: symlink sub-link -> sub", "", os.Symlink("sub", a.WS+"/sub-link"))
	r.fs("control: create sub-link/made.txt", "", os.WriteFile(a.WS+"/sub-link/made.txt", []byte("made"), 0o644))
	d, err = readFile(a.WS + "/sub/made.txt")
	r.fs("control: read sub/made.txt", d, err)
	return nil
}

func fsHardlink(a args, r *report) error {
	fd, err := dirFD(a.WS)
	if err != nil {
		return err
	}
	control(r, fd)
	r.fs("control: link hello.txt", "", rawLink(fd, "hello.txt", false, fd, "hello-link"))
	r.fs("link ../NAME/secret.txt", "", rawLink(fd, a.Rel+"/secret.txt", false, fd, "stolen-rel"))
	r.fs("symlink outdir -> ../NAME", "", rawSymlink(a.Rel, fd, "outdir"))
	r.fs("link outdir/secret.txt", "", rawLink(fd, "outdir/secret.txt", false, fd, "stolen-dir"))
	r.fs("link in, to outdir/stolen", "", rawLink(fd, "hello.txt", false, fd, "outdir/stolen"))
	r.fs("link absolute", "", rawLink(fd, a.Outside+"/secret.txt", false, fd, "stolen-abs"))
	r.fs("symlink to link through", "", os.Symlink(a.Rel+"/secret.txt", a.WS+"/via"))
	r.fs("link following a symlink", "", rawLink(fd, "via", true, fd, "stolen-via"))
	r.fs("os.Link lexical ..", "", os.Link(a.WS+"/../"+path.Base(a.Outside)+"/secret.txt", a.WS+"/stolen-os"))
	for _, n := range []string{"stolen-rel", "stolen-abs", "stolen-via", "stolen-os", "stolen-dir", "hello-link"} {
		d, err := readFile(a.WS + "/" + n)
		r.fs("read "+n, d, err)
	}
	return nil
}

// fsSwap replaces ws/<path> again and again, atomically (rename over),
// with a symlink out of the root and with a regular file.
func fsSwap(a args, r *report) error {
	target := a.WS + "/" + a.Path
	link, file := target+".link", target+".file"
	counts := map[string]int{}
	for i := 0; i < a.N; i++ {
		os.Remove(link)
		if err := os.Symlink(a.Rel+"/secret.txt", link); err != nil {
			counts["symlink "+errnoName(err)]++
			continue
		}
		counts["rename link "+errnoName(os.Rename(link, target))]++
		if err := os.WriteFile(file, []byte("inside"), 0o644); err != nil {
			counts["write "+errnoName(err)]++
			continue
		}
		counts["rename file "+errnoName(os.Rename(file, target))]++
	}
	for k, v := range counts {
		r.add(step{Op: k, N: int64(v)})
	}
	return nil
}

// fsReadLoop reads ws/<path> N times and tallies the outcomes; anything
// it reads other than "inside" is reported verbatim.
func fsReadLoop(a args, r *report) error {
	counts := map[string]int{}
	seen := map[string]bool{}
	for i := 0; i < a.N; i++ {
		d, err := readFile(a.WS + "/" + a.Path)
		counts[errnoName(err)]++
		if err == nil && d != "inside" && !seen[d] {
			seen[d] = true
			r.add(step{Op: "read other content", Errno: "OK", Data: d})
		}
	}
	for k, v := range counts {
		r.add(step{Op: "read", Errno: k, N: int64(v)})
	}
	return nil
}

func fsWriteRO(a args, r *report) error {
	f := a.RO + "/ro.txt"
	r.fs("write existing", "", os.WriteFile(f, []byte("overwritten"), 0o644))
	r.fs("create new", "", os.WriteFile(a.RO+"/new.txt", []byte("new"), 0o644))
	h, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		h.Close()
	}
	r.fs("open append", "", err)
	r.fs("truncate", "", os.Truncate(f, 0))
	r.fs("mkdir", "", os.Mkdir(a.RO+"/newdir", 0o755))
	r.fs("remove", "", os.Remove(f))
	r.fs("rename", "", os.Rename(f, a.RO+"/moved.txt"))
	r.fs("symlink", "", os.Symlink("ro.txt", a.RO+"/link"))
	r.fs("hard link", "", os.Link(f, a.RO+"/hard"))
	fd, err := dirFD(a.RO)
	if err != nil {
		return err
	}
	r.fs("set mtime", "", rawSetMtime(fd, "ro.txt", 1))
	// Reading stays allowed.
	d, err := readFile(f)
	r.fs("read", d, err)
	return nil
}

func fsProcSelf(a args, r *report) error {
	for _, p := range []string{"/proc/self/environ", "/proc/self/root" + a.Outside + "/secret.txt", "/proc/self/cwd/secret.txt", "/proc/self/fd/0"} {
		d, err := readFile(p)
		r.fs("os.ReadFile "+p, d, err)
	}
	fd, err := dirFD(a.WS)
	if err != nil {
		return err
	}
	control(r, fd)
	d, err := rawRead(fd, "/proc/self/root"+a.Outside+"/secret.txt")
	r.fs("openat /proc/self/root", d, err)
	up := strings.Repeat("../", 30)
	r.fs("symlink to ../../proc/self/root", "", os.Symlink(up+"proc/self/root"+a.Outside+"/secret.txt", a.WS+"/proc-link"))
	d, err = readFile(a.WS + "/proc-link")
	r.fs("read proc-link", d, err)
	r.fs("symlink to ../../proc/self/environ", "", os.Symlink(up+"proc/self/environ", a.WS+"/env-link"))
	d, err = readFile(a.WS + "/env-link")
	r.fs("read env-link", d, err)
	return nil
}

func fsMutateOutside(a args, r *report) error {
	fd, err := dirFD(a.WS)
	if err != nil {
		return err
	}
	control(r, fd)
	secret := a.Rel + "/secret.txt"
	r.fs("unlink ../", "", rawUnlink(fd, secret))
	if err := os.WriteFile(a.WS+"/evil.txt", []byte("evil"), 0o644); err != nil {
		return err
	}
	// The same mutations through a symlinked directory out of the root,
	// which reach the jail (a lexical ".." stops in wazero).
	r.fs("symlink outdir -> ../NAME", "", rawSymlink(a.Rel, fd, "outdir"))
	r.fs("unlink outdir/", "", rawUnlink(fd, "outdir/secret.txt"))
	r.fs("rename over outdir/", "", rawRename(fd, "evil.txt", fd, "outdir/secret.txt"))
	r.fs("rename out of outdir/", "", rawRename(fd, "outdir/secret.txt", fd, "moved-in.txt"))
	r.fs("mkdir outdir/", "", rawMkdir(fd, "outdir/made"))
	r.fs("rmdir outdir/sub", "", rawRmdir(fd, "outdir/sub"))
	r.fs("set mtime outdir/", "", rawSetMtime(fd, "outdir/secret.txt", 1))
	r.fs("symlink in outdir/", "", rawSymlink("x", fd, "outdir/planted-link"))
	f, err := rawOpen(fd, "outdir/secret.txt", oTrunc, true)
	if err == nil {
		f.Close()
	}
	r.fs("truncate outdir/", "", err)
	f, err = rawOpen(fd, "outdir/created.txt", oCreat, true)
	if err == nil {
		f.Close()
	}
	r.fs("create outdir/", "", err)
	// Controls: each mutation on a path of the workspace works.
	if err := os.WriteFile(a.WS+"/victim.txt", []byte("victim"), 0o644); err != nil {
		return err
	}
	r.fs("control: unlink", "", rawUnlink(fd, "victim.txt"))
	r.fs("control: rename", "", rawRename(fd, "evil.txt", fd, "sub/evil.txt"))
	r.fs("control: mkdir", "", rawMkdir(fd, "made"))
	r.fs("control: rmdir", "", rawRmdir(fd, "made"))
	r.fs("control: set mtime", "", rawSetMtime(fd, "sub/evil.txt", 1))
	f, err = rawOpen(fd, "sub/evil.txt", oTrunc, true)
	if err == nil {
		f.Close()
	}
	r.fs("control: truncate", "", err)
	f, err = rawOpen(fd, "created.txt", oCreat, true)
	if err == nil {
		f.Close()
	}
	r.fs("control: create", "", err)
	if err := os.WriteFile(a.WS+"/evil.txt", []byte("evil"), 0o644); err != nil {
		return err
	}
	r.fs("rename over ../", "", rawRename(fd, "evil.txt", fd, secret))
	r.fs("rename out of ../", "", rawRename(fd, secret, fd, "moved-in.txt"))
	r.fs("mkdir ../", "", rawMkdir(fd, a.Rel+"/made"))
	r.fs("set mtime ../", "", rawSetMtime(fd, secret, 1))
	f, err = rawOpen(fd, secret, oTrunc, true)
	if err == nil {
		f.Close()
	}
	r.fs("truncate ../", "", err)
	f, err = rawOpen(fd, a.Rel+"/created.txt", oCreat, true)
	if err == nil {
		f.Close()
	}
	r.fs("create ../", "", err)
	return nil
}

func fsSymlinkLoop(a args, r *report) error {
	r.fs("symlink a -> b", "", os.Symlink("loop-b", a.WS+"/loop-a"))
	r.fs("symlink b -> a", "", os.Symlink("loop-a", a.WS+"/loop-b"))
	r.fs("symlink self", "", os.Symlink("loop-self", a.WS+"/loop-self"))
	d, err := readFile(a.WS + "/loop-a")
	r.fs("read loop-a", d, err)
	d, err = readFile(a.WS + "/loop-self")
	r.fs("read loop-self", d, err)
	_, err = os.Stat(a.WS + "/loop-a/x")
	r.fs("stat loop-a/x", "", err)
	r.fs("control: symlink chain c1 -> c2 -> hello.txt", "", errors.Join(os.Symlink("c2", a.WS+"/c1"), os.Symlink("hello.txt", a.WS+"/c2")))
	d, err = readFile(a.WS + "/c1")
	r.fs("control: read c1", d, err)
	return nil
}

var hoardFiles []*os.File

// fsFDExhaustion opens ws/<path> up to N times and keeps every descriptor.
func fsFDExhaustion(a args, r *report) error {
	var first error
	for i := 0; i < a.N; i++ {
		f, err := os.Open(a.WS + "/" + a.Path)
		if err != nil {
			first = err
			break
		}
		hoardFiles = append(hoardFiles, f)
	}
	r.add(step{Op: "open until refused", Errno: errnoName(first), N: int64(len(hoardFiles))})
	return nil
}

func fsRead(a args, r *report) error {
	d, err := readFile(a.Path)
	r.fs(fmt.Sprintf("read %s", a.Path), d, err)
	return nil
}

// fsSpecial opens ws/<path> (a FIFO or socket the host placed there, as a
// command could) through the workspace's descriptor and through os.
func fsSpecial(a args, r *report) error {
	fd, err := dirFD(a.WS)
	if err != nil {
		return err
	}
	control(r, fd)
	f, err := rawOpen(fd, a.Path, 0, true)
	if err == nil {
		f.Close()
	}
	r.fs("open for reading", "", err)
	d, err := readFile(a.WS + "/" + a.Path)
	r.fs("os.ReadFile", d, err)
	r.fs("os.WriteFile", "", os.WriteFile(a.WS+"/"+a.Path, []byte("x"), 0o644))
	return nil
}

// fsSparse tries to make a 1 TiB sparse file, by a write at a huge offset
// and by truncate, then writes a small one.
func fsSparse(a args, r *report) error {
	f, err := os.OpenFile(a.WS+"/sparse", os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt([]byte("x"), 1<<40)
	r.fs("pwrite at 1 TiB", "", err)
	r.fs("ftruncate to 1 TiB", "", f.Truncate(1<<40))
	r.fs("truncate by path to 1 TiB", "", os.Truncate(a.WS+"/sparse", 1<<40))
	_, err = f.WriteAt([]byte("small"), 4096)
	r.fs("control: pwrite at 4 KiB", "", err)
	return nil
}

// fsManyFiles creates ws/many/f0... until N or an error.
func fsManyFiles(a args, r *report) error {
	if err := os.Mkdir(a.WS+"/many", 0o755); err != nil {
		return err
	}
	var i int
	var err error
	for ; i < a.N; i++ {
		var f *os.File
		if f, err = os.Create(fmt.Sprintf("%s/many/f%d", a.WS, i)); err != nil {
			break
		}
		f.Close()
	}
	r.add(step{Op: "create until refused", Errno: errnoName(err), N: int64(i)})
	r.fs("control: rewrite f0", "", os.WriteFile(a.WS+"/many/f0", []byte("again"), 0o644))
	return nil
}

// fsNestedRO writes ws/<path>/... (a read-only grant inside the
// read-write workspace) through the workspace's own descriptor.
func fsNestedRO(a args, r *report) error {
	fd, err := dirFD(a.WS)
	if err != nil {
		return err
	}
	control(r, fd)
	p := a.Path
	f, err := rawOpen(fd, p+"/ro.txt", oTrunc, true)
	if err == nil {
		f.Close()
	}
	r.fs("truncate", "", err)
	f, err = rawOpen(fd, p+"/new.txt", oCreat, true)
	if err == nil {
		f.Close()
	}
	r.fs("create", "", err)
	r.fs("unlink", "", rawUnlink(fd, p+"/ro.txt"))
	r.fs("rename out", "", rawRename(fd, p+"/ro.txt", fd, "taken.txt"))
	r.fs("rename in", "", rawRename(fd, "hello.txt", fd, p+"/hello.txt"))
	r.fs("mkdir", "", rawMkdir(fd, p+"/d"))
	r.fs("symlink", "", rawSymlink("ro.txt", fd, p+"/sl"))
	r.fs("link out", "", rawLink(fd, p+"/ro.txt", false, fd, "linked.txt"))
	r.fs("set mtime", "", rawSetMtime(fd, p+"/ro.txt", 1))
	r.fs("symlink plink -> "+p, "", rawSymlink(p, fd, "plink"))
	f, err = rawOpen(fd, "plink/ro.txt", oTrunc, true)
	if err == nil {
		f.Close()
	}
	r.fs("truncate through plink", "", err)
	d, err := rawRead(fd, p+"/ro.txt")
	r.fs("control: read", d, err)
	f, err = rawOpen(fd, "written.txt", oCreat|oTrunc, true)
	if err == nil {
		f.Close()
	}
	r.fs("control: create in the workspace", "", err)
	return nil
}
