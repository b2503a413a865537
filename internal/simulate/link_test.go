package simulate_test

// Registers the source types, which the configurations these tests load
// name (config.RegisterSourceType).
import _ "github.com/flexiq/flexiq-scaled/internal/source"
