package main

import (
	"github.com/strand-io/strand/internal/tlsconf"
	"github.com/strand-io/strand/node"
)

// securitySettings are the transport-security settings, with
// Kafka's names (see internal/tlsconf). They join serverSettings at init.
var securitySettings = map[string]func(cfg *node.Config, v string) error{
	"listener.security.protocol.map": func(c *node.Config, v string) error {
		m, err := tlsconf.ParseProtocolMap(v)
		if err != nil {
			return err
		}
		c.Security.Protocols = m
		return nil
	},
	"ssl.keystore.location":   func(c *node.Config, v string) error { c.Security.KeystoreLocation = v; return nil },
	"ssl.truststore.location": func(c *node.Config, v string) error { c.Security.TruststoreLocation = v; return nil },
	"ssl.crl.location":        func(c *node.Config, v string) error { c.Security.CRLLocation = v; return nil },
	"ssl.client.auth": func(c *node.Config, v string) error {
		a, err := tlsconf.ParseClientAuth(v)
		if err != nil {
			return err
		}
		c.Security.ClientAuth = a
		return nil
	},
	"ssl.principal.mapping.rules": func(c *node.Config, v string) error {
		m, err := tlsconf.ParseMappingRules(v)
		if err != nil {
			return err
		}
		c.Security.Mapping = m
		return nil
	},
	"inter.broker.principals": func(c *node.Config, v string) error {
		ps, err := tlsconf.ParsePrincipals(v)
		if err != nil {
			return err
		}
		c.Security.InterBrokerPrincipals = ps
		return nil
	},
	"gossip.encryption.key.location": func(c *node.Config, v string) error { c.Security.GossipKeyLocation = v; return nil },
}

func init() {
	for k, set := range securitySettings {
		serverSettings[k] = set
	}
}
