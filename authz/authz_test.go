package authz

import "testing"

func TestParseNames(t *testing.T) {
	for in, want := range map[string]Operation{"read": OpRead, "IdempotentWrite": OpIdempotentWrite, "DESCRIBE_CONFIGS": OpDescribeConfigs, "cluster-action": OpClusterAction, "ALL": OpAll} {
		if got, err := ParseOperation(in); err != nil || got != want {
			t.Errorf("ParseOperation(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseOperation("unknown"); err == nil {
		t.Error("Unknown parsed")
	}
	for in, want := range map[string]ResourceType{"topic": ResourceTopic, "transactional-id": ResourceTransactionalID, "TRANSACTIONAL_ID": ResourceTransactionalID, "Cluster": ResourceCluster} {
		if got, err := ParseResourceType(in); err != nil || got != want {
			t.Errorf("ParseResourceType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got, err := ParsePatternType("PREFIXED"); err != nil || got != PatternPrefixed {
		t.Errorf("ParsePatternType = %v, %v", got, err)
	}
}
