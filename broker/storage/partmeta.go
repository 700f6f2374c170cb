package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PartitionMetadataFile names the file in a partition's directory that
// says which topic the log belongs to, by id, in Kafka's format:
//
//	version: 0
//	topic_id: <id>
//
// A topic deleted and created again under the same name has a new id, so
// a broker that was away meanwhile can tell its old log from the new
// topic's partition.
const PartitionMetadataFile = "partition.metadata"

// WritePartitionMetadata records, crash-safely, that the log in dir
// belongs to the topic with id topicID.
func WritePartitionMetadata(fsys FS, dir, topicID string) error {
	if topicID == "" || strings.ContainsAny(topicID, " \n\r") {
		return fmt.Errorf("topic id %q cannot be recorded", topicID)
	}
	return writeFileAtomic(fsys, filepath.Join(dir, PartitionMetadataFile), []byte("version: 0\ntopic_id: "+topicID+"\n"))
}

// ReadPartitionMetadata returns the topic id recorded in dir ("" when the
// log has none: it was created before topic ids were recorded), or an
// error when the file is there but does not read as Kafka's format.
func ReadPartitionMetadata(fsys FS, dir string) (string, error) {
	b, err := orOS(fsys).ReadFile(filepath.Join(dir, PartitionMetadataFile))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var version, id string
	for n := 0; sc.Scan(); n++ {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return "", fmt.Errorf("%s: line %d is not \"key: value\"", PartitionMetadataFile, n+1)
		}
		switch k = strings.TrimSpace(k); {
		case n == 0 && k == "version":
			version = strings.TrimSpace(v)
		case n == 1 && k == "topic_id":
			id = strings.TrimSpace(v)
		default:
			return "", fmt.Errorf("%s: unexpected line %d %q", PartitionMetadataFile, n+1, sc.Text())
		}
	}
	if version != "0" {
		return "", fmt.Errorf("%s: version %q, want 0", PartitionMetadataFile, version)
	}
	if id == "" {
		return "", fmt.Errorf("%s: no topic_id", PartitionMetadataFile)
	}
	return id, nil
}
