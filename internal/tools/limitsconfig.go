package tools

import (
	"fmt"
	"time"
)

// LimitsConfig is limits as an operator writes them in YAML: durations as
// "5s", zero or absent fields inherit, and max_queue: 0 means no queue (it
// cannot mean "inherit", which leaving the key out says). Every config
// section that sets limits uses this one type.
type LimitsConfig struct {
	Timeout     time.Duration `yaml:"timeout" validate:"gte=0"`
	Target      time.Duration `yaml:"target" validate:"gte=0"`
	Max         time.Duration `yaml:"max" validate:"gte=0"`
	MaxInFlight int           `yaml:"max_in_flight" validate:"gte=0,lte=100000"`
	MaxQueue    *int          `yaml:"max_queue" validate:"omitempty,gte=0,lte=1000000"`
	QueueWait   time.Duration `yaml:"queue_wait" validate:"gte=0"`
	WaitTimeout time.Duration `yaml:"wait_timeout" validate:"gte=0"`
}

// Limits converts to the contract's form.
func (l LimitsConfig) Limits() Limits {
	t := Limits{Timeout: l.Timeout, Target: l.Target, Max: l.Max, MaxInFlight: l.MaxInFlight, QueueWait: l.QueueWait,
		WaitTimeout: l.WaitTimeout}
	if l.MaxQueue != nil {
		t.MaxQueue = *l.MaxQueue
		if t.MaxQueue == 0 {
			t.MaxQueue = NoQueue
		}
	}
	return t
}

// IsZero reports whether nothing is set.
func (l LimitsConfig) IsZero() bool { return l.Limits() == Limits{} }

// Check reports bounds that contradict each other among those set;
// inherited values are checked when the registry resolves them.
func (l LimitsConfig) Check() error {
	if l.Target > 0 && l.Max > 0 && l.Target > l.Max {
		return fmt.Errorf("target %v is above max %v", l.Target, l.Max)
	}
	if l.Max > 0 && l.Timeout > 0 && l.Max > l.Timeout {
		return fmt.Errorf("max %v is above timeout %v", l.Max, l.Timeout)
	}
	return nil
}
