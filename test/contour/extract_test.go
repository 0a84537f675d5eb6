package contour

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/source/manifest"
)

// unit is one example file, or one code block of a documentation page: the objects a
// reader would apply together.
type unit struct {
	name  string // release-relative path, with "#N" for the Nth YAML block of a page
	group string // the file's directory (examples) or the page (docs): where includes are looked up
	objs  []runtime.Object
	// problems are documents that are not objects Portico can read (fragments, templates).
	problems []manifest.Problem
}

// docsDir is where Contour v1.33 keeps its documentation: the release's own docs are
// site/content/docs/main (the numbered directories are older releases).
const docsDir = "site/content/docs/main"

// corpus reads every unit of the release in dir that holds at least one object of a
// kind Portico reads, in path order.
func corpus(dir string) ([]unit, error) {
	var units []unit
	add := func(name, group string, data []byte) {
		if !bytes.Contains(data, []byte("kind:")) {
			return
		}
		objs, probs := manifest.Decode(name+".yaml", data)
		if len(objs) > 0 || mentionsHTTPProxy(data) {
			units = append(units, unit{name: name, group: group, objs: objs, problems: probs})
		}
	}
	err := filepath.WalkDir(filepath.Join(dir, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isManifest(path) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		add(rel, filepath.Dir(rel), data)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(filepath.Join(dir, docsDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".md" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		for i, block := range yamlBlocks(data) {
			add(fmt.Sprintf("%s#%d", rel, i+1), rel, block)
		}
		return nil
	})
	return units, err
}

func isManifest(path string) bool {
	switch filepath.Ext(path) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

var httpProxyKind = regexp.MustCompile(`(?m)^\s*kind:\s*HTTPProxy\s*$`)

func mentionsHTTPProxy(data []byte) bool { return httpProxyKind.Match(data) }

var fence = regexp.MustCompile("^(\\s*)```\\s*([A-Za-z]*)")

// yamlBlocks returns the YAML a page's fenced code blocks hold: the whole text of a
// yaml (or unlabelled) block, and the here-documents of a shell block (`kubectl apply
// -f - <<EOF`). A block indented under a list item loses that indentation.
func yamlBlocks(page []byte) [][]byte {
	var blocks [][]byte
	var cur []string
	open, indent, lang := false, "", ""
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		m := fence.FindStringSubmatch(line)
		switch {
		case m != nil && !open:
			open, indent, lang, cur = true, m[1], strings.ToLower(m[2]), nil
		case m != nil && open:
			open = false
			blocks = append(blocks, blockYAML(lang, cur)...)
		case open:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

var shellLangs = []string{"bash", "sh", "shell", "console"}

func blockYAML(lang string, lines []string) [][]byte {
	if !slices.Contains(shellLangs, lang) {
		return [][]byte{[]byte(strings.Join(lines, "\n") + "\n")}
	}
	var docs [][]byte
	var cur []string
	end := ""
	for _, l := range lines {
		switch {
		case end == "":
			if i := strings.Index(l, "<<"); i >= 0 {
				end = strings.Trim(strings.TrimSpace(l[i+2:]), `'"-`)
				cur = nil
			}
		case strings.TrimSpace(l) == end:
			docs = append(docs, []byte(strings.Join(cur, "\n")+"\n"))
			end = ""
		default:
			cur = append(cur, l)
		}
	}
	return docs
}
