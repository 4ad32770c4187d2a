package kafka

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probeLimit bounds what a probe reads of any answer. A broker's ApiVersions
// or Metadata answer to the probe is a few hundred bytes; anything that
// claims more is not a Kafka broker answering it.
//
// sarama itself allocates whatever length the first four bytes of an answer
// claim: an HTTP server's "HTTP" reads as 1.2 GB, allocated again on every
// attempt (IBM/sarama v1.61.1, Broker.sendAndReceiveApiVersions). The
// probe is why sarama only ever talks to an address that answered as Kafka.
const probeLimit = 64 << 10

// probeAnswerTimeoutMax bounds the wait for each answer of a probe: a
// broker answers ApiVersions at once, even under load.
const probeAnswerTimeoutMax = 5 * time.Second

// NotKafkaError says that an address answered, or stayed silent, in a way
// no Kafka listener does. The relay retries it (a broker may be starting
// behind a proxy), and says what the address answered.
type NotKafkaError struct {
	Addr   string
	Answer string // what it answered, for a person
}

func (e *NotKafkaError) Error() string {
	return fmt.Sprintf("%s is not a Kafka listener: it %s; check --kafka-brokers (host and port of a broker's listener)",
		e.Addr, e.Answer)
}

// probe asks the broker at addr what a Kafka client asks first (its API
// versions; then, without SASL, the metadata of no topic; with SASL,
// whether it takes the configured mechanism), reading at most probeLimit
// bytes of any answer. It returns nil when addr answered as a Kafka broker
// whose listener fits the configuration, a refusal when the answer proves a
// setting wrong (TLS or SASL on one side only, a mechanism the broker does
// not offer), a *NotKafkaError when addr is not a Kafka listener, and the
// connection error when it cannot be reached.
func probe(ctx context.Context, addr string, k Config, sc *sarama.Config) error {
	conn, err := probeDial(ctx, addr, k, sc.Net.TLS.Config)
	if err != nil {
		return err
	}
	defer conn.Close() //nolint:errcheck // a probe
	p := prober{conn: conn, addr: addr, timeout: min(k.RequestTimeout, probeAnswerTimeoutMax)}
	versions := kmsg.NewPtrApiVersionsRequest() // v0: every broker answers it, before any authentication
	var vresp kmsg.ApiVersionsResponse
	if err := p.roundTrip(versions, &vresp); err != nil {
		return p.firstAnswer(ctx, err, k)
	}
	if vresp.ErrorCode != 0 {
		return &NotKafkaError{Addr: addr, Answer: "answered the API versions request with error " + kerr.ErrorForCode(vresp.ErrorCode).Error()}
	}
	if sc.Net.SASL.Enable {
		return p.checkSASL(k)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = metadataVersion(vresp.ApiKeys)
	meta.Topics = []kmsg.MetadataRequestTopic{}
	var mresp kmsg.MetadataResponse
	mresp.Version = meta.Version
	switch err := p.roundTrip(meta, &mresp); {
	case err == nil:
		return nil
	case dropped(err):
		return refusal{fmt.Errorf("the Kafka broker at %s answered, then closed the connection on a request without "+
			"authentication: its listener requires SASL; set --kafka-sasl-mechanism, --kafka-sasl-user and --kafka-sasl-password", addr)}
	default:
		return fmt.Errorf("asking %s for metadata: %w", addr, err)
	}
}

// metadataVersion is the newest Metadata version up to 8 (the last one
// without flexible headers) that the broker takes.
func metadataVersion(keys []kmsg.ApiVersionsResponseApiKey) int16 {
	for _, key := range keys {
		if key.ApiKey == kmsg.Metadata.Int16() {
			return max(min(key.MaxVersion, 8), key.MinVersion)
		}
	}
	return 1
}

// probeDial connects to addr, over TLS when tc is set.
func probeDial(ctx context.Context, addr string, k Config, tc *tls.Config) (net.Conn, error) {
	d := net.Dialer{Timeout: k.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	if tc == nil {
		return conn, nil
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tconn := tls.Client(conn, tc)
	hctx, cancel := context.WithTimeout(ctx, min(k.RequestTimeout, probeAnswerTimeoutMax))
	defer cancel()
	if err := tconn.HandshakeContext(hctx); err != nil {
		conn.Close() //nolint:errcheck // failed already
		return nil, tlsFailed(ctx, addr, k, err)
	}
	return tconn, nil
}

// tlsFailed explains a TLS handshake that failed.
func tlsFailed(ctx context.Context, addr string, k Config, err error) error {
	var header tls.RecordHeaderError
	switch {
	case errors.As(err, &header):
		return refusal{fmt.Errorf("%s does not speak TLS: it answered the TLS handshake with %s; "+
			"check --kafka-brokers, or turn --kafka-tls off for a plaintext listener", addr, describe(header.RecordHeader[:]))}
	case (dropped(err) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil && speaksKafka(ctx, addr, k):
		return refusal{fmt.Errorf("%s is a Kafka listener without TLS: it did not complete the TLS handshake and answers "+
			"plaintext Kafka; turn --kafka-tls off, or use the port of the broker's TLS listener", addr)}
	}
	if rerr := refused(err, k, &sarama.Config{}); rerr != nil {
		return refusal{rerr}
	}
	return fmt.Errorf("TLS handshake with %s: %w", addr, err)
}

// speaksKafka reports whether addr answers an API versions request in
// plaintext.
func speaksKafka(ctx context.Context, addr string, k Config) bool {
	conn, err := probeDial(ctx, addr, k, nil)
	if err != nil {
		return false
	}
	defer conn.Close() //nolint:errcheck // a probe
	p := prober{conn: conn, addr: addr, timeout: min(k.RequestTimeout, probeAnswerTimeoutMax)}
	var resp kmsg.ApiVersionsResponse
	return p.roundTrip(kmsg.NewPtrApiVersionsRequest(), &resp) == nil
}

// speaksTLS reports whether addr completes a TLS handshake (its
// certificate unchecked: this only asks which protocol it speaks).
func speaksTLS(ctx context.Context, addr string, k Config) bool {
	_, err := probeDial(ctx, addr, k, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // not used for data
	return err == nil
}

// prober exchanges requests with one connection.
type prober struct {
	conn    net.Conn
	addr    string
	timeout time.Duration
	corr    int32
	// head is the start of the last answer that was not a Kafka response
	// (at most 512 bytes), for describing it.
	head []byte
}

// errNotAResponse says an answer was not a Kafka response; p.head holds
// its start.
var errNotAResponse = errors.New("not a Kafka response")

// roundTrip sends req and reads its response into resp.
func (p *prober) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	p.corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(ClientIDDefault))
	if err := p.conn.SetDeadline(time.Now().Add(p.timeout)); err != nil {
		return err
	}
	if _, err := p.conn.Write(f.AppendRequest(nil, req, p.corr)); err != nil {
		return err
	}
	var size [4]byte
	if n, err := io.ReadFull(p.conn, size[:]); err != nil {
		p.head = size[:n]
		return err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > probeLimit {
		p.readHead(size[:])
		return errNotAResponse
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(p.conn, body); err != nil {
		return err
	}
	if int32(binary.BigEndian.Uint32(body)) != p.corr {
		p.head = append(size[:], body[:min(len(body), 508)]...)
		return errNotAResponse
	}
	body = body[4:]
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() && len(body) > 0 {
		body = body[1:] // the empty tagged fields of response header v1
	}
	if err := resp.ReadFrom(body); err != nil {
		p.head = append(size[:], body[:min(len(body), 508)]...)
		return errNotAResponse
	}
	return nil
}

// readHead keeps the start of an answer: first, then what else arrives
// within a moment, up to 512 bytes.
func (p *prober) readHead(first []byte) {
	p.head = append(make([]byte, 0, 512), first...)
	buf := make([]byte, 512-len(first))
	_ = p.conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)) //nolint:errcheck // best effort
	n, _ := io.ReadAtLeast(p.conn, buf, len(buf))
	p.head = append(p.head, buf[:n]...)
}

// firstAnswer explains why the first request got no Kafka response.
func (p *prober) firstAnswer(ctx context.Context, err error, k Config) error {
	if rerr := refused(err, k, &sarama.Config{}); rerr != nil {
		return refusal{rerr} // a TLS alert: the broker refused our certificate, say
	}
	plain := !k.UsesTLS()
	var netErr net.Error
	switch {
	case errors.Is(err, errNotAResponse) && looksTLS(p.head) && plain,
		dropped(err) && len(p.head) == 0 && plain && speaksTLS(ctx, p.addr, k):
		return refusal{fmt.Errorf("%s is a TLS listener: set --kafka-tls (and --kafka-tls-ca-file if its certificate is "+
			"signed by a private CA), or use the port of the broker's plaintext listener", p.addr)}
	case errors.Is(err, errNotAResponse):
		return &NotKafkaError{Addr: p.addr, Answer: "answered " + describe(p.head)}
	case dropped(err):
		return &NotKafkaError{Addr: p.addr, Answer: "closed the connection without answering the API versions request every Kafka broker answers"}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &NotKafkaError{Addr: p.addr, Answer: fmt.Sprintf("accepted the connection but answered nothing in %s", p.timeout)}
	}
	return fmt.Errorf("asking %s for its API versions: %w", p.addr, err)
}

// checkSASL asks the broker whether its listener takes the configured
// SASL mechanism.
func (p *prober) checkSASL(k Config) error {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	req.Mechanism = strings.ToUpper(k.SASLMechanism)
	var resp kmsg.SASLHandshakeResponse
	if err := p.roundTrip(req, &resp); err != nil {
		return fmt.Errorf("asking %s for SASL: %w", p.addr, err)
	}
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case errors.Is(err, kerr.IllegalSaslState):
		return refusal{fmt.Errorf("the Kafka listener at %s does not use SASL (it answered %v); unset --kafka-sasl-mechanism, "+
			"or use the port of the broker's SASL listener", p.addr, err)}
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return refusal{fmt.Errorf("the Kafka listener at %s does not offer SASL %s; it offers %s: set --kafka-sasl-mechanism to one of them",
			p.addr, req.Mechanism, strings.Join(resp.SupportedMechanisms, ", "))}
	}
	return nil
}

// looksTLS reports whether b starts like a TLS record (an alert or a
// handshake).
func looksTLS(b []byte) bool {
	return len(b) >= 3 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03
}

// describe says what the start of an answer looks like, for a person.
func describe(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case bytes.HasPrefix(b, []byte("HTTP/")):
		line, _, _ := bytes.Cut(b, []byte("\n"))
		return fmt.Sprintf("HTTP (%q): it is a web server or proxy", strings.TrimSpace(string(line)))
	case looksTLS(b):
		return "a TLS record: it speaks TLS"
	case bytes.HasPrefix(b, []byte("SSH-")):
		return "SSH"
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	if len(line) > 60 {
		line = line[:60]
	}
	printable := strings.IndexFunc(string(line), func(r rune) bool { return !unicode.IsPrint(r) && r != '\r' }) < 0
	if printable {
		return fmt.Sprintf("text that is not Kafka (%q)", strings.TrimSpace(string(line)))
	}
	return fmt.Sprintf("%d bytes that are not Kafka (starting % x)", len(b), b[:min(len(b), 8)])
}

// dropped reports whether err is the peer closing the connection.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
