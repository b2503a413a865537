package config_test

// The source types register themselves from package source, which imports
// config; linking it here fills the registry for config's own tests too,
// which load tables of every type but cannot import source themselves.
import _ "github.com/flexiq/flexiq-scaled/internal/source"
