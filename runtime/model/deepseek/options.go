package deepseek

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// ThinkingMode is DeepSeek's thinking switch.
type ThinkingMode string

// Thinking modes. ThinkingDefault sends no thinking field.
const (
	ThinkingDefault  ThinkingMode = ""
	ThinkingEnabled  ThinkingMode = "enabled"
	ThinkingDisabled ThinkingMode = "disabled"
)

func (m ThinkingMode) validate() error {
	switch m {
	case ThinkingDefault, ThinkingEnabled, ThinkingDisabled:
		return nil
	}
	return fmt.Errorf("%w: thinking %q is not %q or %q", ErrInvalidConfig, string(m), ThinkingEnabled, ThinkingDisabled)
}

// UnmarshalYAML accepts enabled, disabled or a boolean.
func (m *ThinkingMode) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: thinking must be enabled, disabled or a boolean", node.Line)
	}
	var b bool
	if node.Tag == "!!bool" && node.Decode(&b) == nil {
		*m = ThinkingDisabled
		if b {
			*m = ThinkingEnabled
		}
		return nil
	}
	mode := ThinkingMode(node.Value)
	if mode == ThinkingDefault {
		return fmt.Errorf("line %d: thinking must be enabled, disabled or a boolean", node.Line)
	}
	if err := mode.validate(); err != nil {
		return fmt.Errorf("line %d: %w", node.Line, err)
	}
	*m = mode
	return nil
}

// Options is the YAML configuration of the provider. Durations are Go
// duration strings ("90s"). Callers decode it strictly (KnownFields) and
// turn it into a Config with Config.
type Options struct {
	BaseURL         string        `yaml:"base_url"`
	APIKeyEnv       string        `yaml:"api_key_env"`
	Model           string        `yaml:"model"`
	Thinking        ThinkingMode  `yaml:"thinking"`
	ReasoningEffort string        `yaml:"reasoning_effort"`
	MaxRetries      *int          `yaml:"max_retries"`
	HeaderTimeout   time.Duration `yaml:"header_timeout"`
	IdleTimeout     time.Duration `yaml:"idle_timeout"`
}

// Config returns the Config these options describe; unset options keep
// their defaults. An explicit max_retries of 0 disables retries.
func (o Options) Config() Config {
	cfg := Config{
		BaseURL:         o.BaseURL,
		APIKeyEnv:       o.APIKeyEnv,
		Model:           o.Model,
		Thinking:        o.Thinking,
		ReasoningEffort: o.ReasoningEffort,
		HeaderTimeout:   o.HeaderTimeout,
		IdleTimeout:     o.IdleTimeout,
	}
	if o.MaxRetries != nil {
		cfg.MaxRetries = *o.MaxRetries
		if cfg.MaxRetries == 0 {
			cfg.MaxRetries = -1
		}
	}
	return cfg
}
