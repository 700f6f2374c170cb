package node

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nodeMeta is meta.properties: the node id and cluster id a data directory
// belongs to, written once the node learns the cluster id, so a directory
// cannot silently join another cluster or be reused under another id.
type nodeMeta struct {
	nodeID    int32
	clusterID string
}

const metaFile = "meta.properties"

func readMeta(dir string) (nodeMeta, error) {
	m := nodeMeta{nodeID: -1}
	f, err := os.Open(filepath.Join(dir, metaFile))
	if os.IsNotExist(err) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "version":
			// A newer binary may write a newer layout: refuse it rather
			// than guess at what the directory holds.
			if v != "1" {
				return m, fmt.Errorf("%s: version %s, this binary reads version 1 (a newer Strand wrote this data directory: run that binary)", metaFile, v)
			}
		case "node.id":
			n, err := strconv.Atoi(v)
			if err != nil {
				return m, fmt.Errorf("%s: bad node.id %q", metaFile, v)
			}
			m.nodeID = int32(n)
		case "cluster.id":
			m.clusterID = v
		}
	}
	return m, sc.Err()
}

func writeMeta(dir string, m nodeMeta) error {
	data := fmt.Sprintf("#Strand node identity; do not edit\nversion=1\nnode.id=%d\ncluster.id=%s\n", m.nodeID, m.clusterID)
	tmp := filepath.Join(dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, metaFile))
}
