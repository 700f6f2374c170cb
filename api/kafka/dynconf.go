package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/config"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// configSynonyms is a described config's synonyms on Kafka's wire: the
// sources the request layer listed (a broker config's dynamic, static and
// default values, the one in force first), or the entry itself.
func configSynonyms(e *pb.ConfigEntry, v *string, src kmsg.ConfigSource) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	if len(e.Synonyms) == 0 {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = e.Name, v, src
		return []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{syn}
	}
	out := make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(e.Synonyms))
	for _, s := range e.Synonyms {
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		val := s.Value
		syn.Name, syn.Value, syn.Source = s.Name, &val, configSource(s.Source)
		out = append(out, syn)
	}
	return out
}

// configType is a described config's type on Kafka's wire (v3+).
func configType(t string) kmsg.ConfigType {
	switch t {
	case config.TypeBoolean:
		return kmsg.ConfigTypeBoolean
	case config.TypeString:
		return kmsg.ConfigTypeString
	case config.TypeInt:
		return kmsg.ConfigTypeInt
	case config.TypeShort:
		return kmsg.ConfigTypeShort
	case config.TypeLong:
		return kmsg.ConfigTypeLong
	case config.TypeDouble:
		return kmsg.ConfigTypeDouble
	case config.TypeList:
		return kmsg.ConfigTypeList
	case config.TypeClass:
		return kmsg.ConfigTypeClass
	case config.TypePassword:
		return kmsg.ConfigTypePassword
	}
	return kmsg.ConfigTypeUnknown
}
