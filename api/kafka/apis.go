package kafka

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// handlerFunc answers one request; req is the decoded request, its
// version set. It returns the answer (the caller sets its version), or
// nil for none (acks=0). A non-nil error closes the connection: only for
// what breaks the protocol (violation).
type handlerFunc func(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error)

type api struct {
	name     string
	min, max int16
	fn       handlerFunc
}

// apis is what this listener serves, by API key: filled from init
// functions, read-only once serving starts.
var apis = map[int16]api{}

// register serves key at versions [min, max].
func register(key kmsg.Key, min, max int16, fn handlerFunc) {
	if _, dup := apis[int16(key)]; dup {
		panic(fmt.Sprintf("kafka: API %s registered twice", key.Name()))
	}
	if req := kmsg.RequestForKey(int16(key)); req == nil || max > req.MaxVersion() || min < 0 || min > max {
		panic(fmt.Sprintf("kafka: API %s: versions %d to %d are not all known to the codec", key.Name(), min, max))
	}
	apis[int16(key)] = api{name: key.Name(), min: min, max: max, fn: fn}
}

// servedAll lists every API registered and its versions, by key
// (consumer_groups.go: what ApiVersions lists depends on the node).
func servedAll() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k, a := range apis {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

func init() {
	register(kmsg.ApiVersions, 0, 4, handleApiVersions)
}

// handleApiVersions lists the APIs served, and from v3 the features: the
// transaction.version supported and finalized (franz-go and the Java
// client run KIP-890's transaction version 2 only when it is finalized).
func handleApiVersions(ctx context.Context, c *Conn, r kmsg.Request) (kmsg.Response, error) {
	req := r.(*kmsg.ApiVersionsRequest)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = servedTo(c)
	if req.Version < 3 {
		return resp, nil
	}
	feats, err := c.H.DescribeFeatures(ctx, &pb.DescribeFeaturesRequest{})
	if err != nil {
		resp.ErrorCode, _ = splitCode(err)
		return resp, nil
	}
	for _, f := range feats.Features {
		resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{
			Name: f.Name, MinVersion: int16(f.SupportedMinVersion), MaxVersion: int16(f.SupportedMaxVersion)})
		if f.FinalizedVersionLevel > 0 {
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{
				Name: f.Name, MinVersionLevel: int16(f.FinalizedVersionLevel), MaxVersionLevel: int16(f.FinalizedVersionLevel)})
		}
		resp.FinalizedFeaturesEpoch = f.Epoch
	}
	return resp, nil
}

// apiVersionsUnsupported is the version-0 answer to an ApiVersions
// version this listener does not serve. As Kafka (KIP-511) it lists only
// ApiVersions' own range, which tells the client to ask again at the
// highest version served: a client handed every key instead takes the
// version 0 answer as final, and never learns the finalized features
// (franz-go then runs its first transaction below transaction version 2).
func apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code(pb.ErrorCode_UNSUPPORTED_VERSION)
	a := apis[int16(kmsg.ApiVersions)]
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: int16(kmsg.ApiVersions), MinVersion: a.min, MaxVersion: a.max}}
	resp.SetVersion(0)
	return resp
}

// errMsg is an error message as a nullable string: nil when empty.
func errMsg(msg string) *string {
	if msg == "" {
		return nil
	}
	return &msg
}

// splitCode is errs.Split as the wire carries it.
func splitCode(err error) (int16, *string) {
	c, msg := errs.Split(err)
	return code(c), errMsg(msg)
}
