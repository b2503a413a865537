package decide

import "testing"

func TestRunningOnLive(t *testing.T) {
	tests := []struct {
		name              string
		running           int64
		draining, threads int
		want              int64
	}{
		{"nothing draining", 7, 0, 4, 7},
		{"a draining worker's jobs are not the live workers'", 7, 1, 4, 3},
		{"never below zero", 2, 2, 4, 0},
		{"one thread each", 5, 2, 1, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RunningOnLive(tc.running, tc.draining, tc.threads); got != tc.want {
				t.Errorf("RunningOnLive(%d, %d, %d) = %d, want %d", tc.running, tc.draining, tc.threads, got, tc.want)
			}
		})
	}
}
