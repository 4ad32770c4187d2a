package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/IBM/sarama"
)

// refused explains a connection error that waiting cannot fix (the
// configuration, the credentials, a TLS handshake either side refuses) in
// terms of the flags to change, or returns nil for an error worth retrying
// (the cluster is down or unreachable). sc is the configuration that failed.
func refused(err error, k Config, sc *sarama.Config) error {
	var (
		cerr     sarama.ConfigurationError
		opErr    *net.OpError
		header   tls.RecordHeaderError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	switch {
	case errors.As(err, &cerr):
		return fmt.Errorf("kafka configuration: %w", err)
	case errors.Is(err, sarama.ErrSASLAuthenticationFailed):
		return credentialsRefused(k, err)
	case errors.Is(err, sarama.ErrClusterAuthorizationFailed):
		// The idempotent producer's InitProducerId: Kafka 3.0 and newer
		// allow it to a principal with WRITE on any topic, 2.8 asks for
		// IDEMPOTENT_WRITE on the cluster.
		return fmt.Errorf("kafka refused the relay a producer id (%w): its principal%s needs WRITE and DESCRIBE on the "+
			"topics it publishes to (Kafka 3.0 and newer), or IDEMPOTENT_WRITE on the cluster (Kafka 2.8); docs/running.md: Kafka ACLs",
			err, principal(k))
	case errors.As(err, &opErr) && opErr.Op == "remote error" && k.TLSCertFile == "":
		// A TLS alert from the broker (crypto/tls reports it so).
		return fmt.Errorf("kafka refused the TLS handshake (%w): the broker requires a client certificate; "+
			"set --kafka-tls-cert-file and --kafka-tls-key-file", err)
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return fmt.Errorf("kafka refused the TLS handshake (%w): the broker does not accept the client certificate in %s",
			err, k.TLSCertFile)
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname):
		return fmt.Errorf("the Kafka broker's TLS certificate is not trusted (%w); set --kafka-tls-ca-file to the CA that signed it", err)
	case errors.As(err, &header):
		return fmt.Errorf("the Kafka broker does not speak TLS on that port (%w); check --kafka-brokers and --kafka-tls", err)
	case sc.Net.SASL.Enable && dropped(err) && answersWithoutSASL(k.Brokers[0], sc):
		// Some brokers close the connection instead of answering
		// SASL_AUTHENTICATION_FAILED; one that answers an unauthenticated
		// request meanwhile is up, so it refused the authentication.
		return credentialsRefused(k, err)
	}
	return nil
}

// principal names the relay's Kafka principal for errors, "" without SASL.
func principal(k Config) string {
	if k.SASLUser == "" {
		return ""
	}
	return fmt.Sprintf(" User:%s", k.SASLUser)
}

func credentialsRefused(k Config, err error) error {
	return fmt.Errorf("kafka refused the credentials of user %q (SASL %s); check --kafka-sasl-user, --kafka-sasl-password "+
		"and --kafka-sasl-mechanism: %w", k.SASLUser, strings.ToUpper(k.SASLMechanism), err)
}

// answersWithoutSASL reports whether the broker at addr answers an
// ApiVersions request (which Kafka allows before authentication) on a
// connection like sc's but without SASL.
func answersWithoutSASL(addr string, sc *sarama.Config) bool {
	plain := *sc
	plain.Net.SASL.Enable = false
	b := sarama.NewBroker(addr)
	if err := b.Open(&plain); err != nil {
		return false
	}
	defer b.Close() //nolint:errcheck // a probe
	_, err := b.ApiVersions(&sarama.ApiVersionsRequest{})
	return err == nil
}
