package analysis

// BaseF0 is the median F0 (Hz) that espeak-ng's stock variant produces at
// its default pitch (-p 50) on the calibration text, or 0 for an unknown
// variant. Engines that set pitch in Hz through a variant file's "pitch"
// line (rather than through -p) scale that line by F0/BaseF0.
func BaseF0(variant string) float64 {
	for _, v := range variants {
		if v.name == variant {
			return v.f0[2] // pitchPoints[2] == 50
		}
	}
	return 0
}
