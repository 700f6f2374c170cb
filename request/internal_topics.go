package request

import (
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The internal topics hold the groups' committed offsets and the
// transactions' states; only their coordinators write them, and only the
// cleaner removes their records. As Kafka's ReplicaManager, a client's
// Produce to one and its DeleteRecords of one are INVALID_TOPIC_EXCEPTION
// (asked after authorization and after the partition is found to exist).
// CreateTopics of their names, DeleteTopics and CreatePartitions of them
// are refused by the controller (controller/topics.go, partitions.go).

// internalAppendError refuses a client's append to an internal topic.
func internalAppendError(topic string) error {
	if metadata.IsInternalTopic(topic) {
		return errs.New(pb.ErrorCode_INVALID_TOPIC_EXCEPTION, "clients cannot append to internal topic %s", topic)
	}
	return nil
}

// internalDeleteRecordsError refuses DeleteRecords of an internal topic.
func internalDeleteRecordsError(topic string) error {
	if metadata.IsInternalTopic(topic) {
		return errs.New(pb.ErrorCode_INVALID_TOPIC_EXCEPTION, "records of internal topic %s cannot be deleted", topic)
	}
	return nil
}
