//go:build wasip1

package main

import (
	"os"
	"path"
	"strings"
)

func init() {
	register("hoststate-probe", hoststateProbe)
}

// hoststateProbe goes after the host's own state inside the workspace:
// for each absolute path in Names it reads, stats, lists, appends a.Path
// to it, plants a file in it and lists its parent (to discover it); with
// Rel it makes ws/hs-link a relative symlink to Rel and reads ID, lists
// and appends through it; with Outside it renames that directory (one
// holding host state) away.
func hoststateProbe(a args, r *report) error {
	for _, p := range a.Names {
		d, err := readFile(p)
		r.fs("read "+p, d, err)
		_, err = os.Lstat(p)
		r.fs("stat "+p, "", err)
		ents, err := os.ReadDir(p)
		r.fs("list "+p, names(ents), err)
		r.fs("append "+p, "", appendTo(p, a.Path))
		r.fs("plant in "+p, "", os.WriteFile(p+"/planted", []byte(a.Path), 0o644))
		ents, err = os.ReadDir(path.Dir(p))
		r.fs("list the parent of "+p, names(ents), err)
	}
	if a.Rel != "" {
		link := a.WS + "/hs-link"
		r.fs("symlink hs-link", "", os.Symlink(a.Rel, link))
		d, err := readFile(link + "/" + a.ID)
		r.fs("read through hs-link", d, err)
		ents, err := os.ReadDir(link)
		r.fs("list through hs-link", names(ents), err)
		r.fs("append through hs-link", "", appendTo(link+"/"+a.ID, a.Path))
	}
	if a.Outside != "" {
		r.fs("rename "+a.Outside, "", os.Rename(a.Outside, a.Outside+"-moved"))
	}
	return nil
}

func names(ents []os.DirEntry) string {
	var s []string
	for _, e := range ents {
		s = append(s, e.Name())
	}
	return strings.Join(s, ",")
}

func appendTo(p, line string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
