package record

// ControlType is the key type of a control record (a transaction marker).
type ControlType int16

const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return "UNKNOWN"
}
