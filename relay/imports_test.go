package relay_test

import (
	"go/build"
	"strings"
	"testing"
)

// Kafka's types live in internal/kafka: the relay package does not import a
// Kafka client, so that the client can be changed in one place.
func TestRelay_ImportsNoKafkaClient(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.Contains(imp, "sarama") || strings.Contains(imp, "franz-go") {
			t.Errorf("relay imports %s; Kafka types belong in internal/kafka", imp)
		}
	}
	for _, imp := range append(pkg.TestImports, pkg.XTestImports...) { // the tests run kfake, a broker
		if strings.Contains(imp, "sarama") {
			t.Errorf("relay's tests import %s; the client is internal/kafka's", imp)
		}
	}
}
