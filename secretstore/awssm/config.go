package awssm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/secretstore"
)

// backendType is the name the backend registers under.
const backendType = "awssm"

func init() { secretstore.Register(backendType, backend{}) }

// maxAttemptsLimit is the largest maxAttempts the config accepts.
const maxAttemptsLimit = 20

// section is the "awssm" member of a secretstore.Config. The store's scope
// is the config's defaultScope: there is no separate name prefix.
type section struct {
	// Region, e.g. "eu-west-1". Default: the AWS chain (AWS_REGION, profile).
	Region string `json:"region"`
	// Endpoint overrides the Secrets Manager URL (emulators, VPC endpoints).
	Endpoint string `json:"endpoint"`
	// Profile selects a shared-config profile.
	Profile string `json:"profile"`
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials,
	// for emulators and tests; production should use the default chain.
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
	SessionToken    string `json:"sessionToken"`
	// RecoveryWindowDays (7..30, default AWS's 30) or ForceDelete.
	RecoveryWindowDays int  `json:"recoveryWindowDays"`
	ForceDelete        bool `json:"forceDelete"`
	// KMSKeyID encrypts new secrets; default aws/secretsmanager.
	KMSKeyID string `json:"kmsKeyId"`
	// MaxAttempts is the store's attempts per call, retries included
	// (1..20); default 3.
	MaxAttempts int `json:"maxAttempts"`
	// MaxBackoff caps the pause between attempts, a duration such as "2s";
	// default 2s.
	MaxBackoff string `json:"maxBackoff"`
}

var regionPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// problems returns every problem with the section. Messages never quote
// credentials.
func (c section) problems() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, "awssm: "+fmt.Sprintf(format, args...)) }
	if c.Region != "" && !regionPattern.MatchString(c.Region) {
		add("region %q is not a region name (lowercase letters, digits and hyphens, such as us-east-1)", c.Region)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("endpoint must be an absolute http or https URL")
		}
	}
	switch {
	case (c.AccessKeyID == "") != (c.SecretAccessKey == ""):
		add("accessKeyId and secretAccessKey must be given together")
	case c.SessionToken != "" && c.AccessKeyID == "":
		add("sessionToken needs accessKeyId and secretAccessKey")
	}
	if c.Profile != "" && c.AccessKeyID != "" {
		add("profile and static credentials exclude each other")
	}
	for _, p := range deleteProblems(c.RecoveryWindowDays, c.ForceDelete) {
		add("%s", p)
	}
	if c.MaxAttempts < 0 || c.MaxAttempts > maxAttemptsLimit {
		add("maxAttempts %d is outside 1..%d (0 means the default of 3)", c.MaxAttempts, maxAttemptsLimit)
	}
	if c.MaxBackoff != "" {
		if d, err := time.ParseDuration(c.MaxBackoff); err != nil || d <= 0 {
			add("maxBackoff %q is not a positive duration such as 2s", c.MaxBackoff)
		}
	}
	return problems
}

// awsConfig loads the AWS configuration the section describes.
func (c section) awsConfig(ctx context.Context) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(c.Profile))
	}
	if c.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, loadError(err)
	}
	if c.Endpoint != "" {
		cfg.BaseEndpoint = aws.String(c.Endpoint)
	}
	return cfg, nil
}

// loadError describes a failure to load the AWS configuration. Only a
// missing profile is named: other errors may quote shared-file lines, which
// can hold keys.
func loadError(err error) error {
	var missing config.SharedConfigProfileNotExistError
	if errors.As(err, &missing) {
		return fmt.Errorf("AWS profile %q does not exist", missing.Profile)
	}
	return errors.New("loading the AWS configuration (environment, shared config and credentials files) failed")
}

type backend struct{}

// Validate checks the awssm section and that defaultScope is a usable AWS
// name prefix, reporting every problem.
func (backend) Validate(cfg secretstore.Config) error {
	var c section
	err := cfg.DecodeSection(&c)
	problems := c.problems()
	if sc := strings.Trim(cfg.DefaultScope, "/"); sc != "" && secretstore.ValidateName(sc) == nil {
		if err := checkAWSName(sc); err != nil {
			problems = append(problems, "defaultScope: "+err.Error())
		}
	}
	if problems != nil {
		return errors.Join(err, &secretstore.ConfigError{Problems: problems})
	}
	return err
}

// Open builds the AWS configuration from the section and returns a store
// scoped to defaultScope.
func (b backend) Open(ctx context.Context, cfg secretstore.Config, oo secretstore.OpenOptions) (*secretstore.Store, error) {
	if err := b.Validate(cfg); err != nil {
		return nil, err
	}
	var c section
	if err := cfg.DecodeSection(&c); err != nil {
		return nil, err
	}
	awsCfg, err := c.awsConfig(ctx)
	if err != nil {
		return nil, &secretstore.Error{Op: "open", Kind: edgesecrets.ErrInvalid, Err: err}
	}
	maxBackoff, _ := time.ParseDuration(c.MaxBackoff) // validated
	return New(ctx, Options{
		AWSConfig: &awsCfg, Scope: cfg.DefaultScope, RecoveryWindowDays: c.RecoveryWindowDays,
		ForceDelete: c.ForceDelete, KMSKeyID: c.KMSKeyID, MaxAttempts: c.MaxAttempts, MaxBackoff: maxBackoff,
		Logger: oo.Logger, MeterProvider: oo.MeterProvider,
	})
}
