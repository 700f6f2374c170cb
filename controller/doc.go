// Package controller is the metadata quorum: a hashicorp/raft group whose
// replicated log holds the typed metadata records of package metadata, and
// the active controller's decisions (broker liveness, leader election, ISR
// changes, topic placement, producer-id blocks). The image itself, and the
// pure function that applies records to it, live in package metadata.
package controller
