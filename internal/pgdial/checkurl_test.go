package pgdial_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/outbox-relay/outbox-relay/internal/pgdial"
)

func TestCheckURL_RefusesWhatPgxCannotReadOrMisreadsWithoutShowingIt(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"postgres://app:s3%40cret@db:5432/app?sslmode=require",
		"postgres://app:s3cret@db-1:5432,db-2:5433/app?target_session_attrs=read-write",
		"host=db user=app password=s3@cret dbname=app",
		"postgres://app@db/app?pool_max_conns=4",
	} {
		if err := pgdial.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{
		"postgres://app:s3@cret@db/app",
		"postgres://app:s3cret@db-1,db-2:5432@x/app",
		"postgres://app:s3cret@db:port/app",
		"postgres://app:s3%zzcret@db/app",
		"postgres://app:s3cret@db/app?pool_max_conns=s3cret",
		"host=db password='s3cret",
	} {
		err := pgdial.CheckURL(bad)
		if !errors.Is(err, pgdial.ErrBadURL) {
			t.Errorf("CheckURL(%q) = %v, want ErrBadURL", bad, err)
			continue
		}
		for _, part := range []string{"s3", "cret", "db"} {
			if strings.Contains(err.Error(), part) {
				t.Errorf("CheckURL(%q) = %q shows %q", bad, err, part)
			}
		}
	}
}
