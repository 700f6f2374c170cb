package tlsconf

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Mapper is ssl.principal.mapping.rules: Kafka's SslPrincipalMapper. The
// rules are tried in order against a certificate's subject distinguished
// name (RFC 2253 form, as Java's X500Principal.getName() prints it); the
// first that matches gives the principal's name. DEFAULT matches every
// name and keeps it whole. A RULE:pattern/replacement/ with an optional L
// or U after the last slash matches when pattern matches the whole name,
// which becomes replacement (with $1… for the pattern's groups), lower- or
// upper-cased if asked. No rule matching fails the authentication.
type Mapper struct {
	rules []rule
}

type rule struct {
	dflt        bool
	re          *regexp.Regexp
	replacement string
	lower       bool
	upper       bool
	src         string
}

// ErrNoMatchingRule is a distinguished name no rule maps.
var ErrNoMatchingRule = errors.New("no ssl.principal.mapping.rules rule matches the certificate's subject")

// ruleSplit reads one rule at a time: DEFAULT or RULE:pattern/replacement/[LU],
// where a backslash escapes the next character inside the pattern and the
// replacement, then a comma or a newline (or the end).
var ruleSplit = regexp.MustCompile(`^\s*(?:(DEFAULT)|RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/([LU]?))\s*(?:[,\n]\s*|$)`)

// javaGroup is a Java replacement group reference ($1); Go's Expand needs
// braces when a digit or letter follows.
var javaGroup = regexp.MustCompile(`\$(\d+)`)

// ParseMappingRules parses ssl.principal.mapping.rules ("" means DEFAULT).
func ParseMappingRules(s string) (*Mapper, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return &Mapper{rules: []rule{{dflt: true, src: "DEFAULT"}}}, nil
	}
	m := &Mapper{}
	rest := s
	for strings.TrimSpace(rest) != "" {
		loc := ruleSplit.FindStringSubmatchIndex(rest)
		if loc == nil {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: cannot read %q: want DEFAULT or RULE:pattern/replacement/[LU]", rest)
		}
		sub := func(i int) string {
			if loc[2*i] < 0 {
				return ""
			}
			return rest[loc[2*i]:loc[2*i+1]]
		}
		if sub(1) != "" {
			m.rules = append(m.rules, rule{dflt: true, src: "DEFAULT"})
		} else {
			pat := sub(2)
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: pattern %q: %v", pat, err)
			}
			repl := javaReplacement(sub(3))
			m.rules = append(m.rules, rule{re: re, replacement: repl, lower: sub(4) == "L", upper: sub(4) == "U", src: strings.TrimSpace(rest[:loc[1]])})
		}
		rest = rest[loc[1]:]
	}
	return m, nil
}

// javaReplacement turns a Java Matcher replacement into a Go Expand
// template: $n becomes ${n}, a backslash takes the next character
// literally, and a literal $ is written $$.
func javaReplacement(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(s[i])
			}
		case c == '$':
			if m := javaGroup.FindStringSubmatch(s[i:]); m != nil {
				b.WriteString("${" + m[1] + "}")
				i += len(m[0]) - 1
			} else {
				b.WriteString("$$")
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Map returns the principal name for the distinguished name dn.
func (m *Mapper) Map(dn string) (string, error) {
	for _, r := range m.rules {
		if r.dflt {
			return dn, nil
		}
		idx := r.re.FindStringSubmatchIndex(dn)
		if idx == nil {
			continue
		}
		out := string(r.re.ExpandString(nil, r.replacement, dn, idx))
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: %q", ErrNoMatchingRule, dn)
}

// attrNames are the attribute keywords Java's RFC 2253 form uses; other
// attributes print as their dotted OID and #hex of the DER value.
var attrNames = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// SubjectDN is cert's subject in RFC 2253 form as Java's
// X500Principal.getName() prints it: the last RDN first, "CN=alice,O=strand".
func SubjectDN(cert *x509.Certificate) (string, error) {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil {
		return "", err
	} else if len(rest) > 0 {
		return "", errors.New("trailing data after the subject")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			oid := atv.Type.String()
			name, known := attrNames[oid]
			s, isString := atv.Value.(string)
			if !known || !isString {
				der, err := asn1.Marshal(atv.Value)
				if err != nil {
					return "", err
				}
				b.WriteString(oid + "=#" + hex.EncodeToString(der))
				continue
			}
			b.WriteString(name + "=" + escapeRFC2253(s))
		}
	}
	return b.String(), nil
}

func escapeRFC2253(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(`,+"\<>;`, r),
			r == '#' && i == 0,
			r == ' ' && (i == 0 || i == len(s)-1):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
