package kafkatest

import (
	"log"
	"os"

	"github.com/IBM/sarama"
)

// SARAMA_DEBUG=1 sends sarama's internal log to stderr in any test that
// uses this package.
func init() {
	if os.Getenv("SARAMA_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
}
