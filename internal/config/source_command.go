package config

// Command holds the settings of the source types command.
// (Filled in by the work on issue 8; see source.go for how a type registers.)
type Command struct{}

// rawCommand holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawCommand struct{}

// effectiveCommand is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectiveCommand struct{}

func (s Source) effectiveCommand() effectiveCommand { return effectiveCommand{} }
