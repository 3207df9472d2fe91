package runtime

// EdgeWatermark sends wm to every downstream subtask of edge e only.
func (o *Outputs) EdgeWatermark(e int, wm int64) error {
	for _, c := range o.edges[e] {
		if err := c.Push(WatermarkElement(wm), o.done); err != nil {
			return err
		}
	}
	return nil
}
