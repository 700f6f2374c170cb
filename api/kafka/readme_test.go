package kafka_test

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/api/kafka"
)

// TestReadmeListsServedAPIs: the README's table of the Kafka listener's
// APIs is what ApiVersions answers, API for API and version for version.
func TestReadmeListsServedAPIs(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "### APIs served on the Kafka listener")
	if start < 0 {
		t.Fatal("README has no section \"APIs served on the Kafka listener\"")
	}
	s = s[start:]
	if end := strings.Index(s, "\n- "); end > 0 {
		s = s[:end]
	}
	var inReadme []string
	for _, m := range regexp.MustCompile(`([A-Z][A-Za-z]+) (\d+)–(\d+)`).FindAllStringSubmatch(s, -1) {
		inReadme = append(inReadme, fmt.Sprintf("%s %s-%s", m[1], m[2], m[3]))
	}
	var served []string
	for _, k := range kafka.Served() {
		served = append(served, fmt.Sprintf("%s %d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion))
	}
	sort.Strings(inReadme)
	sort.Strings(served)
	if strings.Join(inReadme, ", ") != strings.Join(served, ", ") {
		t.Fatalf("README lists\n  %s\nApiVersions answers\n  %s", strings.Join(inReadme, ", "), strings.Join(served, ", "))
	}
}
