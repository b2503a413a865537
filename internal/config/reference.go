package config

// Reference lists the documented tables other than the sources', in the
// order of the reference (docs/configuration.md, flexiq-scaled.toml(5));
// SourceTypeDocs gives the sources'.
func Reference() []TableDoc {
	return []TableDoc{
		daemonKeys,
		capacityKeys,
		poolIntro,
		poolWorkerKeys,
		poolScalingKeys,
		poolDrainKeys,
		poolReadinessKeys,
		poolPolicyKeys,
		poolServiceKey,
		limitsKeys,
		serviceKeys,
		servicePortsKeys,
		servicePortKeys,
		readinessKeys,
		probeTimingKeys,
		templateKeys,
		wakeKeys,
		hostGuardKeys,
		prometheusKeys,
		fleetKeys,
		poolFleetKeys,
		ruleKeys,
		behaviorKeys,
		behaviorDirectionKeys,
		behaviorPolicyKeys,
	}
}
