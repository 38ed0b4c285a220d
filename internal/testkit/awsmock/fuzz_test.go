package awsmock_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	smmock "github.com/edgesecrets/edgesecrets/internal/testkit/awsmock"
)

// FuzzRequest drives the endpoint's request decoding and every operation
// with arbitrary bodies: it must answer 200 or a 4xx with a JSON body (an
// AWS error shape for errors), never panic, and keep each staging label on
// at most one version.
func FuzzRequest(f *testing.F) {
	ops := smmock.Operations()
	seeds := map[string]string{
		smmock.OpCreateSecret:             `{"Name":"n","SecretString":"{\"k\":\"v\"}","Tags":[{"Key":"a","Value":"b"}],"ClientRequestToken":"00000000-0000-4000-8000-000000000009"}`,
		smmock.OpGetSecretValue:           `{"SecretId":"s","VersionStage":"AWSPREVIOUS"}`,
		smmock.OpBatchGetSecretValue:      `{"Filters":[{"Key":"name","Values":["s","!x"]}],"MaxResults":1,"NextToken":"eyJiIjoibmFtZSJ9"}`,
		smmock.OpPutSecretValue:           `{"SecretId":"s","SecretBinary":"AAEC","VersionStages":["AWSCURRENT","X"]}`,
		smmock.OpDescribeSecret:           `{"SecretId":"s"}`,
		smmock.OpListSecrets:              `{"MaxResults":1,"SortBy":"name","SortOrder":"asc","IncludePlannedDeletion":true}`,
		smmock.OpDeleteSecret:             `{"SecretId":"s","RecoveryWindowInDays":7}`,
		smmock.OpRestoreSecret:            `{"SecretId":"s"}`,
		smmock.OpTagResource:              `{"SecretId":"s","Tags":[{"Key":"k","Value":"v"}]}`,
		smmock.OpUntagResource:            `{"SecretId":"s","TagKeys":["k"]}`,
		smmock.OpUpdateSecretVersionStage: `{"SecretId":"s","VersionStage":"AWSCURRENT","MoveToVersionId":"00000000-0000-4000-8000-000000000001","RemoveFromVersionId":"x"}`,
	}
	for i, op := range ops {
		f.Add(uint8(i), []byte(seeds[op]))
	}
	f.Add(uint8(0), []byte(`{"Name":null,"SecretString":1}`))
	f.Add(uint8(5), []byte(`[1,2`))
	f.Add(uint8(6), []byte(`{"SecretId":"s","ForceDeleteWithoutRecovery":true,"RecoveryWindowInDays":99999999999999999999}`))
	f.Fuzz(func(t *testing.T, opIndex uint8, body []byte) {
		op := ops[int(opIndex)%len(ops)]
		srv := smmock.New(smmock.Options{})
		for _, setup := range []struct{ op, body string }{
			{smmock.OpCreateSecret, `{"Name":"s","SecretString":"1","ClientRequestToken":"00000000-0000-4000-8000-000000000001"}`},
			{smmock.OpPutSecretValue, `{"SecretId":"s","SecretString":"2"}`},
		} {
			if rec := serve(srv, setup.op, setup.body); rec.Code != http.StatusOK {
				t.Fatalf("setup %s: %d %s", setup.op, rec.Code, rec.Body)
			}
		}
		rec := serve(srv, op, string(body))
		if rec.Code != http.StatusOK && (rec.Code < 400 || rec.Code > 499) {
			t.Fatalf("%s answered %d", op, rec.Code)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s answered invalid JSON", op)
		}
		if rec.Code != http.StatusOK {
			var eb errBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Type == "" || eb.Message == "" {
				t.Fatalf("%s error answer lacks __type or message", op)
			}
		}
		for _, name := range srv.Names() {
			info, _ := srv.Secret(name)
			seen := map[string]bool{}
			for _, v := range info.Versions {
				for _, st := range v.Stages {
					if seen[st] {
						t.Fatalf("%s: label %s on two versions of %s", op, st, name)
					}
					seen[st] = true
				}
			}
		}
	})
}

func serve(h http.Handler, op, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "secretsmanager."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Date", "20300607T080910Z")
	req.Header.Set("Authorization", goodAuth)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
