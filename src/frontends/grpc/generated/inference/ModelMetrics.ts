// Original file: proto/model_config.proto


export interface _inference_ModelMetrics_MetricControl_HistogramOptions {
  'buckets'?: (number | string)[];
}

export interface _inference_ModelMetrics_MetricControl_HistogramOptions__Output {
  'buckets': (number)[];
}

export interface _inference_ModelMetrics_MetricControl {
  'metric_identifier'?: (_inference_ModelMetrics_MetricControl_MetricIdentifier | null);
  'histogram_options'?: (_inference_ModelMetrics_MetricControl_HistogramOptions | null);
  'metric_options'?: "histogram_options";
}

export interface _inference_ModelMetrics_MetricControl__Output {
  'metric_identifier': (_inference_ModelMetrics_MetricControl_MetricIdentifier__Output | null);
  'histogram_options'?: (_inference_ModelMetrics_MetricControl_HistogramOptions__Output | null);
  'metric_options'?: "histogram_options";
}

export interface _inference_ModelMetrics_MetricControl_MetricIdentifier {
  'family'?: (string);
}

export interface _inference_ModelMetrics_MetricControl_MetricIdentifier__Output {
  'family': (string);
}

export interface ModelMetrics {
  'metric_control'?: (_inference_ModelMetrics_MetricControl)[];
}

export interface ModelMetrics__Output {
  'metric_control': (_inference_ModelMetrics_MetricControl__Output)[];
}
