package relay_test

// SARAMA_DEBUG=1 sends sarama's internal log to stderr when a test needs it.

import (
	"log"
	"os"

	"github.com/IBM/sarama"
)

func init() {
	if os.Getenv("SARAMA_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
}
