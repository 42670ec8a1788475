"""TensorFlow 1.15's public symbols in the namespaces issue 21 covers, written from its API docs.

The ``tf`` list and the ``tf.bitwise``, ``tf.manip``, ``tf.sets``, ``tf.signal``, ``tf.spectral``
and ``tf.test`` lists were completed (session 21) from TensorFlow's v1 API golden files
(tensorflow/tools/api/golden/v1/tensorflow*.pbtxt, the r1.15-era versions the search index holds),
keeping only names TF 1.15 exported; ``tf.contrib`` stays listed although the golden files omit it.

Data for ``trainer.compat`` (the compatibility table and the unsupported-symbol errors); one
string of whitespace-separated names per namespace. Submodules listed in a namespace
(``nn`` in ``tf``) are counted as symbols of that namespace too.
"""

TF1_SYMBOLS: dict[str, str] = {
    "tf": """
AUTO_REUSE AggregationMethod Assert Print FixedLengthRecordReader IdentityReader LMDBReader ReaderBase
TFRecordReader TextLineReader WholeFileReader write_file assert_greater_equal assert_less_equal assert_negative
assert_non_negative assert_non_positive assert_none_equal assert_positive ConditionalAccumulator DType DeviceSpec Dimension FIFOQueue FixedLenFeature
FixedLenSequenceFeature GradientTape Graph GraphKeys IndexedSlices InteractiveSession Module NoGradient
OpError Operation PaddingFIFOQueue PriorityQueue QueueBase RandomShuffleQueue RegisterGradient Session
SparseTensor Tensor TensorArray TensorShape Variable VariableScope VarLenFeature abs accumulate_n acos acosh
add add_n add_to_collection add_to_collections all_variables angle arg_max arg_min argmax argmin argsort
as_dtype as_string asin asinh assert_equal assert_greater assert_less assert_rank assert_rank_at_least assert_type assign
assign_add assign_sub atan atan2 atanh batch_gather batch_to_space batch_to_space_nd bfloat16 bincount bitcast bool
boolean_mask broadcast_dynamic_shape broadcast_static_shape broadcast_to case cast ceil check_numerics
cholesky clip_by_average_norm clip_by_global_norm clip_by_norm clip_by_value complex complex128 complex64
concat cond confusion_matrix conj constant constant_initializer container control_dependencies
convert_to_tensor cos cosh count_nonzero count_up_to create_partitioned_variables cross cumprod cumsum
decode_base64 decode_csv decode_raw delete_session_tensor depth_to_space device diag diag_part digamma
dimension_value div div_no_nan divide double dynamic_partition dynamic_stitch edit_distance einsum
enable_eager_execution encode_base64 equal erf erfc executing_eagerly exp expand_dims expm1 extract_image_patches
eye fill fixed_size_partitioner float16 float32 float64 floor floor_div floordiv floormod foldl foldr function
gather gather_nd get_collection get_collection_ref get_default_graph get_default_session get_local_variable
get_seed get_session_handle get_session_tensor get_variable get_variable_scope global_norm global_variables
global_variables_initializer glorot_normal_initializer glorot_uniform_initializer gradients greater
greater_equal group guarantee_const half hessians histogram_fixed_width identity identity_n ifft imag
import_graph_def init_scope initialize_all_variables initialize_local_variables initialize_variables int16
int32 int64 int8 invert_permutation is_finite is_inf is_nan is_non_decreasing is_numeric_tensor
is_strictly_increasing is_tensor is_variable_initialized lbeta less less_equal lgamma lin_space linspace
load_file_system_library load_op_library local_variables local_variables_initializer log log1p log_sigmoid
logical_and logical_not logical_or logical_xor make_ndarray make_template make_tensor_proto map_fn
matching_files matmul matrix_band_part matrix_determinant matrix_diag matrix_diag_part matrix_inverse
matrix_set_diag matrix_solve matrix_transpose matrix_triangular_solve maximum meshgrid min_max_variable_partitioner
minimum mod model_variables moving_average_variables multinomial multiply name_scope negative newaxis
no_gradient no_op no_regularizer norm not_equal numpy_function one_hot ones ones_initializer ones_like op_scope
orthogonal_initializer pad parallel_stack parse_example parse_single_example placeholder placeholder_with_default
polygamma pow py_func qr qint16 qint32 qint8 quantize quint16 quint8 random_crop random_gamma
random_normal random_normal_initializer random_poisson random_shuffle random_uniform random_uniform_initializer
range rank read_file real realdiv reciprocal reduce_all reduce_any reduce_join reduce_logsumexp reduce_max
reduce_mean reduce_min reduce_prod reduce_sum register_tensor_conversion_function report_uninitialized_variables
required_space_to_batch_paddings reset_default_graph reshape resource reverse reverse_sequence reverse_v2 rint
round rsqrt saturate_cast saved_model scalar_mul scan scatter_add scatter_div scatter_max scatter_min scatter_mul
scatter_nd scatter_nd_add scatter_nd_sub scatter_nd_update scatter_sub scatter_update searchsorted
segment_max segment_mean segment_min segment_prod segment_sum self_adjoint_eig sequence_mask
serialize_tensor set_random_seed shape shape_n sigmoid sign sin sinh size slice sort space_to_batch
space_to_batch_nd space_to_depth sparse_concat sparse_placeholder sparse_reduce_sum sparse_reshape sparse_tensor_dense_matmul
sparse_tensor_to_dense sparse_to_dense split sqrt square squared_difference squeeze stack stop_gradient
strided_slice string string_join string_split string_to_number substr subtract svd switch_case tables_initializer
tan tanh tensordot tile timestamp to_bfloat16 to_complex128 to_complex64 to_double to_float to_int32 to_int64
trace trainable_variables transpose truediv truncated_normal truncated_normal_initializer truncatediv
truncatemod tuple uint16 uint32 uint64 uint8 unique unique_with_counts unravel_index unsorted_segment_max
unsorted_segment_mean unsorted_segment_min unsorted_segment_prod unsorted_segment_sqrt_n unsorted_segment_sum unstack variable_scope variables_initializer
variance_scaling_initializer verify_tensor_all_finite where where_v2 while_loop zeros zeros_initializer
zeros_like zeta
contrib data estimator initializers layers losses metrics nn summary train
ConfigProto GPUOptions GraphOptions OptimizerOptions RunMetadata RunOptions Summary app flags gfile io logging
python_io
compat disable_eager_execution disable_v2_behavior enable_v2_behavior image linalg math random lite GraphDef NodeDef graph_util SparseTensorValue sparse strings lookup
AttrValue COMPILER_VERSION CXX11_ABI_FLAG ConditionalAccumulatorBase CriticalSection Event GIT_VERSION
GRAPH_DEF_VERSION GRAPH_DEF_VERSION_MIN_CONSUMER GRAPH_DEF_VERSION_MIN_PRODUCER HistogramProto LogMessage
MONOLITHIC_BUILD MetaGraphDef NameAttrList NotDifferentiable QUANTIZED_DTYPES RaggedTensor SessionLog
SparseConditionalAccumulator SparseFeature SummaryMetadata TensorInfo TensorSpec UnconnectedGradients VERSION
VariableAggregation VariableSynchronization add_check_numerics_ops assert_integer assert_near assert_proper_iterable
assert_rank_in assert_same_float_dtype assert_scalar assert_variables_initialized audio autograph batch_scatter_update
betainc bitwise cholesky_solve colocate_with config convert_to_tensor_or_indexed_slices
convert_to_tensor_or_sparse_tensor custom_gradient debugging decode_compressed decode_json_example dequantize
deserialize_many_sparse dimension_at_index disable_resource_variables disable_v2_tensorshape distribute distributions
dtypes enable_resource_variables enable_v2_tensorshape ensure_shape errors experimental extract_volume_patches
fake_quant_with_min_max_args fake_quant_with_min_max_args_gradient fake_quant_with_min_max_vars
fake_quant_with_min_max_vars_gradient fake_quant_with_min_max_vars_per_channel
fake_quant_with_min_max_vars_per_channel_gradient feature_column fft fft2d fft3d fingerprint get_logger
get_static_value histogram_fixed_width_bins ifft2d ifft3d igamma igammac initialize_all_tables keras load_library
manip matrix_solve_ls matrix_square_root nest nondifferentiable_batch_function parse_single_sequence_example
parse_tensor print profiler py_function pywrap_tensorflow quantization quantize_v2 quantized_concat queue ragged
raw_ops regex_replace resource_loader resource_variables_enabled roll self_adjoint_eigvals serialize_many_sparse
serialize_sparse setdiff1d sets signal sparse_add sparse_fill_empty_rows sparse_mask sparse_matmul sparse_maximum
sparse_merge sparse_minimum sparse_reduce_max sparse_reduce_max_sparse sparse_reduce_sum_sparse sparse_reorder
sparse_reset_shape sparse_retain sparse_segment_mean sparse_segment_sqrt_n sparse_segment_sum sparse_slice
sparse_softmax sparse_split sparse_to_indicator sparse_transpose spectral string_strip string_to_hash_bucket
string_to_hash_bucket_fast string_to_hash_bucket_strong sysconfig tensor_scatter_add tensor_scatter_nd_add
tensor_scatter_nd_sub tensor_scatter_nd_update tensor_scatter_sub tensor_scatter_update test tpu
uniform_unit_scaling_initializer user_ops variable_axis_size_partitioner variable_creator_scope variable_op_scope
variant vectorized_map version wrap_function xla
""",
    "tf.nn": """
all_candidate_sampler atrous_conv2d atrous_conv2d_transpose avg_pool avg_pool1d avg_pool2d avg_pool3d
batch_norm_with_global_normalization batch_normalization bias_add bidirectional_dynamic_rnn collapse_repeated
compute_accidental_hits compute_average_loss conv1d conv1d_transpose conv2d conv2d_backprop_filter
conv2d_backprop_input conv2d_transpose conv3d conv3d_transpose convolution crelu ctc_beam_search_decoder
ctc_greedy_decoder ctc_loss depth_to_space depthwise_conv2d depthwise_conv2d_native dilation2d dropout
dynamic_rnn elu embedding_lookup embedding_lookup_sparse erosion2d fixed_unigram_candidate_sampler
fractional_avg_pool fractional_max_pool fused_batch_norm in_top_k l2_loss l2_normalize leaky_relu
learned_unigram_candidate_sampler local_response_normalization log_poisson_loss log_softmax
log_uniform_candidate_sampler lrn max_pool max_pool1d max_pool2d max_pool3d max_pool_with_argmax moments
nce_loss normalize_moments pool quantized_avg_pool quantized_conv2d quantized_max_pool quantized_relu_x
raw_rnn relu relu6 relu_layer rnn_cell safe_embedding_lookup_sparse sampled_softmax_loss selu separable_conv2d
sigmoid sigmoid_cross_entropy_with_logits softmax softmax_cross_entropy_with_logits
softmax_cross_entropy_with_logits_v2 softplus softsign space_to_batch space_to_depth
sparse_softmax_cross_entropy_with_logits static_bidirectional_rnn static_rnn static_state_saving_rnn
sufficient_statistics swish tanh top_k uniform_candidate_sampler weighted_cross_entropy_with_logits
weighted_moments with_space_to_batch xw_plus_b zero_fraction
""",
    "tf.nn.rnn_cell": """
BasicLSTMCell BasicRNNCell DeviceWrapper DropoutWrapper GRUCell LSTMCell LSTMStateTuple MultiRNNCell RNNCell
ResidualWrapper
""",
    "tf.contrib": """
all_reduce autograph batching bayesflow bigtable boosted_trees checkpoint cloud cluster_resolver compiler
constrained_optimization copy_graph crf cudnn_rnn data deprecated distribute distributions eager estimator
factorization feature_column ffmpeg framework gan graph_editor grid_rnn image input_pipeline integrate keras
kernel_methods labeled_tensor layers learn legacy_seq2seq linear_optimizer lookup losses memory_stats metrics
mixed_precision model_pruning nccl nn opt optimizer_v2 periodic_resample predictor proto quantization quantize
rate receptive_field recurrent reduce_slice_ops remote_fused_graph resampler rnn rpc saved_model seq2seq signal
slim solvers sparsemax specs staging stat_summarizer stateless summary tensor_forest tensorboard testing text
tfprof timeseries tpu training util
""",
    "tf.contrib.rnn": """
AttentionCellWrapper BasicLSTMCell BasicRNNCell BidirectionalGridLSTMCell CompiledWrapper Conv1DLSTMCell
Conv2DLSTMCell ConvLSTMCell CoupledInputForgetGateLSTMCell DeviceWrapper DropoutWrapper EmbeddingWrapper
FusedRNNCell GLSTMCell GRUBlockCell GRUBlockCellV2 GRUCell GridLSTMCell HighwayWrapper IndyGRUCell
IndyLSTMCell IndRNNCell InputProjectionWrapper IntersectionRNNCell LSTMBlockCell LSTMBlockFusedCell
LSTMBlockWrapper LSTMCell LSTMStateTuple LayerNormBasicLSTMCell LayerRNNCell MultiRNNCell NASCell
OutputProjectionWrapper PhasedLSTMCell RNNCell ResidualWrapper SRUCell TimeFreqLSTMCell TimeReversedFusedRNN
UGRNNCell static_bidirectional_rnn static_rnn static_state_saving_rnn stack_bidirectional_dynamic_rnn
stack_bidirectional_rnn transpose_batch_time
""",
    "tf.contrib.seq2seq": """
AttentionMechanism AttentionWrapper AttentionWrapperState BahdanauAttention BahdanauMonotonicAttention BaseDecoder
BasicDecoder BasicDecoderOutput BeamSearchDecoder BeamSearchDecoderOutput BeamSearchDecoderState CustomHelper Decoder
FinalBeamSearchDecoderOutput GreedyEmbeddingHelper Helper InferenceHelper LuongAttention LuongMonotonicAttention
SampleEmbeddingHelper ScheduledEmbeddingTrainingHelper ScheduledOutputTrainingHelper TrainingHelper dynamic_decode
gather_tree hardmax monotonic_attention safe_cumprod sequence_loss tile_batch
""",
    "tf.train": """
AdadeltaOptimizer AdagradDAOptimizer AdagradOptimizer AdamOptimizer BytesList Checkpoint CheckpointSaverHook NewCheckpointReader
CheckpointSaverListener ChiefSessionCreator ClusterSpec Coordinator Example ExponentialMovingAverage Feature
FeatureList FeatureLists Features FeedFnHook FinalOpsHook FloatList FtrlOptimizer GlobalStepWaiterHook
GradientDescentOptimizer Int64List LoggingTensorHook LooperThread MomentumOptimizer MonitoredSession
MonitoredTrainingSession NanLossDuringTrainingError NanTensorHook Optimizer ProfilerHook
ProximalAdagradOptimizer ProximalGradientDescentOptimizer QueueRunner RMSPropOptimizer Saver SaverDef Scaffold
SecondOrStepTimer SequenceExample Server ServerDef SessionCreator SessionManager SessionRunArgs
SessionRunContext SessionRunHook SessionRunValues SingularMonitoredSession StepCounterHook StopAtStepHook
SummarySaverHook Supervisor SyncReplicasOptimizer VocabInfo WorkerSessionCreator add_queue_runner
assert_global_step basic_train_loop batch batch_join checkpoint_exists checkpoints_iterator
cosine_decay cosine_decay_restarts create_global_step do_quantize_training_on_graphdef exponential_decay
export_meta_graph generate_checkpoint_state_proto get_checkpoint_mtimes get_checkpoint_state get_global_step
get_or_create_global_step global_step import_meta_graph init_from_checkpoint input_producer inverse_time_decay
latest_checkpoint limit_epochs linear_cosine_decay list_variables load_checkpoint load_variable
match_filenames_once maybe_batch maybe_shuffle_batch natural_exp_decay noisy_linear_cosine_decay
piecewise_constant piecewise_constant_decay polynomial_decay range_input_producer remove_checkpoint
replica_device_setter sdca_fprint sdca_optimizer sdca_shrink_l1 shuffle_batch shuffle_batch_join
slice_input_producer start_queue_runners string_input_producer summary_iterator update_checkpoint_state
warm_start write_graph
""",
    "tf.layers": """
AveragePooling1D AveragePooling2D AveragePooling3D BatchNormalization Conv1D Conv2D Conv2DTranspose Conv3D
Conv3DTranspose Dense Dropout Flatten InputSpec Layer MaxPooling1D MaxPooling2D MaxPooling3D SeparableConv1D
SeparableConv2D average_pooling1d average_pooling2d average_pooling3d batch_normalization conv1d conv2d
conv2d_transpose conv3d conv3d_transpose dense dropout flatten max_pooling1d max_pooling2d max_pooling3d
separable_conv1d separable_conv2d
""",
    "tf.losses": """
Reduction absolute_difference add_loss compute_weighted_loss cosine_distance get_losses get_regularization_loss
get_regularization_losses get_total_loss hinge_loss huber_loss log_loss mean_pairwise_squared_error
mean_squared_error sigmoid_cross_entropy softmax_cross_entropy sparse_softmax_cross_entropy
""",
    "tf.summary": """
Event FileWriter FileWriterCache SessionLog Summary SummaryDescription TaggedRunMetadata all_v2_summary_ops
audio get_summary_description histogram image initialize merge merge_all scalar tensor_summary text
""",
    "tf.initializers": """
constant global_variables glorot_normal glorot_uniform he_normal he_uniform identity lecun_normal
lecun_uniform local_variables ones orthogonal random_normal random_uniform tables_initializer
truncated_normal uniform_unit_scaling variables variance_scaling zeros
""",
    "tf.io": """
FixedLenFeature FixedLenSequenceFeature PaddingFIFOQueue PriorityQueue QueueBase RandomShuffleQueue SparseFeature
TFRecordCompressionType TFRecordOptions TFRecordWriter VarLenFeature decode_and_crop_jpeg decode_base64 decode_bmp
decode_compressed decode_csv decode_gif decode_image decode_jpeg decode_json_example decode_png decode_proto
decode_raw deserialize_many_sparse encode_base64 encode_jpeg encode_png encode_proto extract_jpeg_shape gfile
is_jpeg match_filenames_once matching_files parse_example parse_sequence_example parse_single_example
parse_single_sequence_example parse_tensor read_file serialize_many_sparse serialize_sparse serialize_tensor
tf_record_iterator write_file write_graph
""",
    "tf.python_io": """
TFRecordCompressionType TFRecordOptions TFRecordWriter tf_record_iterator
""",
    "tf.data": """
Dataset FixedLengthRecordDataset Iterator Options TFRecordDataset TextLineDataset experimental
get_output_classes get_output_shapes get_output_types make_initializable_iterator make_one_shot_iterator
""",
    # the v1 API golden file (tensorflow.data.experimental.pbtxt), less the names added after 1.15
    "tf.data.experimental": """
AUTOTUNE CheckpointInputPipelineHook Counter CsvDataset DatasetStructure INFINITE_CARDINALITY
MapVectorizationOptions OptimizationOptions Optional OptionalStructure RandomDataset Reducer SparseTensorStructure
SqlDataset StatsAggregator StatsOptions Structure TFRecordWriter TensorArrayStructure TensorStructure
ThreadingOptions UNKNOWN_CARDINALITY bucket_by_sequence_length bytes_produced_stats cardinality choose_from_datasets
copy_to_device dense_to_sparse_batch enumerate_dataset get_next_as_optional get_single_element group_by_reducer
group_by_window ignore_errors latency_stats make_batched_features_dataset make_csv_dataset
make_saveable_from_iterator map_and_batch map_and_batch_with_legacy_function parallel_interleave
parse_example_dataset prefetch_to_device rejection_resample sample_from_datasets scan shuffle_and_repeat
take_while unbatch unique
""",
    "tf.estimator": """
BaselineClassifier BaselineEstimator BaselineRegressor BestExporter BinaryClassHead BoostedTreesClassifier
BoostedTreesRegressor CheckpointSaverHook CheckpointSaverListener DNNClassifier DNNEstimator
DNNLinearCombinedClassifier DNNLinearCombinedEstimator DNNLinearCombinedRegressor DNNRegressor Estimator
EstimatorSpec EvalSpec Exporter FeedFnHook FinalExporter FinalOpsHook GlobalStepWaiterHook Head LatestExporter
LinearClassifier LinearEstimator LinearRegressor LoggingTensorHook ModeKeys MultiClassHead MultiHead
MultiLabelHead NanLossDuringTrainingError NanTensorHook PoissonRegressionHead ProfilerHook RegressionHead
RunConfig SecondOrStepTimer SessionRunArgs SessionRunContext SessionRunHook SessionRunValues StepCounterHook
StopAtStepHook SummarySaverHook TrainSpec VocabInfo WarmStartSettings add_metrics classifier_parse_example_spec
experimental export inputs regressor_parse_example_spec train_and_evaluate
""",
    "tf.saved_model": """
ASSETS_DIRECTORY ASSETS_KEY Asset Builder CLASSIFY_INPUTS CLASSIFY_METHOD_NAME CLASSIFY_OUTPUT_CLASSES
CLASSIFY_OUTPUT_SCORES DEBUG_DIRECTORY DEBUG_INFO_FILENAME_PB DEFAULT_SERVING_SIGNATURE_DEF_KEY GPU
LEGACY_INIT_OP_KEY MAIN_OP_KEY PREDICT_INPUTS PREDICT_METHOD_NAME PREDICT_OUTPUTS REGRESS_INPUTS REGRESS_METHOD_NAME
REGRESS_OUTPUTS SAVED_MODEL_FILENAME_PB SAVED_MODEL_FILENAME_PBTXT SAVED_MODEL_SCHEMA_VERSION SERVING TPU TRAINING
VARIABLES_DIRECTORY VARIABLES_FILENAME build_signature_def build_tensor_info builder classification_signature_def
constants contains_saved_model experimental get_tensor_from_tensor_info is_valid_signature load load_v2 loader
main_op main_op_with_restore maybe_saved_model_directory predict_signature_def regression_signature_def save
signature_constants signature_def_utils simple_save tag_constants utils
""",
    "tf.math": """
abs accumulate_n acos acosh add add_n angle argmax argmin asin asinh atan atan2 atanh bessel_i0 bessel_i0e
bessel_i1 bessel_i1e betainc bincount ceil confusion_matrix conj cos cosh count_nonzero cumprod cumsum
cumulative_logsumexp digamma divide divide_no_nan equal erf erfc exp expm1 floor floordiv floormod greater
greater_equal igamma igammac imag in_top_k invert_permutation is_finite is_inf is_nan is_non_decreasing
is_strictly_increasing l2_normalize lbeta less less_equal lgamma log log1p log_sigmoid log_softmax logical_and
logical_not logical_or logical_xor maximum minimum mod multiply multiply_no_nan negative nextafter not_equal
polygamma polyval pow real reciprocal reciprocal_no_nan reduce_all reduce_any reduce_euclidean_norm
reduce_logsumexp reduce_max reduce_mean reduce_min reduce_prod reduce_std reduce_sum reduce_variance rint round
rsqrt scalar_mul segment_max segment_mean segment_min segment_prod segment_sum sigmoid sign sin sinh softmax
softplus softsign sqrt square squared_difference subtract tan tanh top_k truediv unsorted_segment_max
unsorted_segment_mean unsorted_segment_min unsorted_segment_prod unsorted_segment_sqrt_n unsorted_segment_sum
xdivy xlogy zero_fraction zeta
""",
    "tf.random": """
all_candidate_sampler categorical experimental fixed_unigram_candidate_sampler gamma get_seed
learned_unigram_candidate_sampler log_uniform_candidate_sampler multinomial normal poisson set_random_seed
shuffle stateless_categorical stateless_multinomial stateless_normal stateless_truncated_normal
stateless_uniform truncated_normal uniform uniform_candidate_sampler
""",
    "tf.linalg": """
LinearOperator adjoint band_part cholesky cholesky_solve cross det diag diag_part eigh eigvalsh einsum
expm eye global_norm inv l2_normalize logdet logm lstsq lu matmul matrix_transpose matvec norm normalize qr
set_diag slogdet solve sqrtm svd tensor_diag tensor_diag_part tensordot trace transpose triangular_solve
tridiagonal_matmul tridiagonal_solve
""",
    "tf.compat": """
as_bytes as_str as_str_any as_text bytes_or_text_types complex_types dimension_at_index dimension_value
forward_compatibility_horizon forward_compatible integral_types path_to_str real_types v1 v2
""",
    "tf.image": """
ResizeMethod adjust_brightness adjust_contrast adjust_gamma adjust_hue adjust_jpeg_quality adjust_saturation
central_crop combined_non_max_suppression convert_image_dtype crop_and_resize crop_to_bounding_box
decode_and_crop_jpeg decode_bmp decode_gif decode_image decode_jpeg decode_png draw_bounding_boxes encode_jpeg
encode_png extract_glimpse extract_image_patches extract_jpeg_shape extract_patches flip_left_right
flip_up_down grayscale_to_rgb hsv_to_rgb image_gradients is_jpeg non_max_suppression
non_max_suppression_overlaps non_max_suppression_padded non_max_suppression_with_scores pad_to_bounding_box
per_image_standardization psnr random_brightness random_contrast random_crop random_flip_left_right
random_flip_up_down random_hue random_jpeg_quality random_saturation resize resize_area resize_bicubic
resize_bilinear resize_image_with_crop_or_pad resize_image_with_pad resize_images resize_nearest_neighbor
resize_with_crop_or_pad rgb_to_grayscale rgb_to_hsv rgb_to_yiq rgb_to_yuv rot90 sample_distorted_bounding_box
sobel_edges ssim ssim_multiscale total_variation transpose transpose_image yiq_to_rgb yuv_to_rgb
""",
    "tf.lite": """
Interpreter OpHint OpsSet Optimize RepresentativeDataset TFLiteConverter TargetSpec TocoConverter constants
experimental toco_convert
""",
    "tf.graph_util": """
convert_variables_to_constants extract_sub_graph import_graph_def must_run_on_cpu remove_training_nodes
tensor_shape_from_node_def_name
""",
    "tf.sparse": """
SparseConditionalAccumulator SparseTensor add concat cross cross_hashed expand_dims eye fill_empty_rows
from_dense mask matmul maximum merge minimum placeholder reduce_max reduce_max_sparse reduce_sum
reduce_sum_sparse reorder reset_shape reshape retain segment_mean segment_sqrt_n segment_sum slice softmax
sparse_dense_matmul split to_dense to_indicator transpose
""",
    "tf.strings": """
as_string bytes_split format join length lower reduce_join regex_full_match regex_replace split strip substr
to_hash_bucket to_hash_bucket_fast to_hash_bucket_strong to_number unicode_decode unicode_decode_with_offsets
unicode_encode unicode_script unicode_split unicode_split_with_offsets unicode_transcode upper
""",
    "tf.lookup": """
KeyValueTensorInitializer StaticHashTable StaticVocabularyTable TextFileIndex TextFileInitializer experimental
""",
    "tf.contrib.lookup": """
HashTable IdTableWithHashBuckets KeyValueTensorInitializer MutableDenseHashTable MutableHashTable
TextFileIdTableInitializer TextFileIndex TextFileInitializer TextFileStringTableInitializer index_table_from_file
index_table_from_tensor index_to_string index_to_string_table_from_file index_to_string_table_from_tensor
""",
    "tf.contrib.metrics": """
accuracy aggregate_metric_map aggregate_metrics auc_using_histogram confusion_matrix count f1_score
precision_at_recall recall_at_precision set_difference set_intersection set_size set_union streaming_accuracy
streaming_auc streaming_concat streaming_covariance streaming_curve_points streaming_dynamic_auc
streaming_false_negatives streaming_false_negatives_at_thresholds streaming_false_positives
streaming_false_positives_at_thresholds streaming_mean streaming_mean_absolute_error
streaming_mean_cosine_distance streaming_mean_iou streaming_mean_relative_error streaming_mean_squared_error
streaming_mean_tensor streaming_pearson_correlation streaming_percentage_less streaming_precision
streaming_precision_at_thresholds streaming_recall streaming_recall_at_k streaming_recall_at_thresholds
streaming_root_mean_squared_error streaming_sensitivity_at_specificity streaming_sparse_average_precision_at_k
streaming_sparse_precision_at_k streaming_sparse_recall_at_k streaming_specificity_at_sensitivity
streaming_true_negatives streaming_true_negatives_at_thresholds streaming_true_positives
streaming_true_positives_at_thresholds
""",
    # tensorflow/contrib/framework/__init__.py's documented symbols (and nest), TF 1.15
    "tf.contrib.framework": """
assert_same_float_dtype assert_scalar assert_scalar_int convert_to_tensor_or_sparse_tensor get_graph_from_inputs
is_numeric_tensor is_non_decreasing is_strictly_increasing is_tensor reduce_sum_n remove_squeezable_dimensions
with_shape with_same_shape deprecated deprecated_args deprecated_arg_values arg_scope add_arg_scope
current_arg_scope has_arg_scope arg_scoped_arguments prepend_name_scope strip_name_scope add_model_variable
assert_global_step assert_or_get_global_step assign_from_checkpoint assign_from_checkpoint_fn assign_from_values
assign_from_values_fn create_global_step filter_variables get_global_step get_or_create_global_step
get_local_variables get_model_variables get_name_scope get_trainable_variables get_unique_variable
get_variables_by_name get_variables_by_suffix get_variable_full_name get_variables_to_restore get_variables
global_variable local_variable model_variable variable VariableDeviceChooser zero_initializer load_checkpoint
list_variables load_variable init_from_checkpoint load_and_remap_matrix_initializer load_embedding_initializer
load_linear_multiclass_bias_initializer load_variable_slot_initializer sort nest
""",
    "tf.contrib.slim": """
add_arg_scope arg_scope arg_scope_func_key arg_scoped_arguments current_arg_scope has_arg_scope
VariableDeviceChooser add_model_variable assert_global_step assert_or_get_global_step assign_from_checkpoint
assign_from_checkpoint_fn assign_from_values assign_from_values_fn create_global_step filter_variables
get_global_step get_local_variables get_model_variables get_or_create_global_step get_trainable_variables
get_unique_variable get_variable_full_name get_variables get_variables_by_name get_variables_by_suffix
get_variables_to_restore global_variable local_variable model_variable variable zero_initializer
apply_regularization avg_pool2d avg_pool3d batch_norm bias_add conv1d conv2d conv2d_in_plane conv2d_transpose
conv3d conv3d_transpose convolution convolution1d convolution2d convolution2d_in_plane convolution2d_transpose
convolution3d convolution3d_transpose dense_to_sparse dropout elu embed_sequence flatten fully_connected gdn
group_norm images_to_sequence instance_norm l1_l2_regularizer l1_regularizer l2_regularizer layer_norm linear
max_pool2d max_pool3d maxout one_hot_encoding optimize_loss pool relu relu6 repeat safe_embedding_lookup_sparse
scale_gradient separable_conv2d separable_convolution2d sequence_to_images softmax spatial_softmax stack
sum_regularizer summarize_activation summarize_tensor unit_norm variance_scaling_initializer xavier_initializer
xavier_initializer_conv2d
data_decoder data_provider dataset dataset_data_provider evaluation learning losses metrics model_analyzer
parallel_reader prefetch_queue queues summaries tfexample_decoder
""",
    "tf.contrib.slim.learning": """
add_gradients_summaries clip_gradient_norms create_train_op multiply_gradients train train_step
""",
    "tf.contrib.slim.losses": """
absolute_difference add_loss compute_weighted_loss cosine_distance get_losses get_regularization_losses
get_total_loss hinge_loss log_loss mean_pairwise_squared_error mean_squared_error sigmoid_cross_entropy
softmax_cross_entropy sparse_softmax_cross_entropy
""",
    "tf.contrib.crf": """
CrfDecodeBackwardRnnCell CrfDecodeForwardRnnCell CrfForwardRnnCell crf_binary_score crf_decode crf_log_likelihood
crf_log_norm crf_multitag_sequence_score crf_sequence_score crf_unary_score viterbi_decode
""",
    "tf.bitwise": """
bitwise_and bitwise_or bitwise_xor invert left_shift right_shift
""",
    "tf.manip": """
batch_to_space_nd gather_nd reshape reverse roll scatter_nd space_to_batch_nd tile
""",
    "tf.sets": """
difference intersection set_difference set_intersection set_size set_union size union
""",
    "tf.signal": """
dct fft fft2d fft3d frame hamming_window hann_window idct ifft ifft2d ifft3d inverse_stft inverse_stft_window_fn irfft
irfft2d irfft3d linear_to_mel_weight_matrix mfccs_from_log_mel_spectrograms overlap_and_add rfft rfft2d rfft3d stft
""",
    "tf.spectral": """
dct fft fft2d fft3d idct ifft ifft2d ifft3d irfft irfft2d irfft3d rfft rfft2d rfft3d
""",
    "tf.test": """
Benchmark StubOutForTesting TestCase assert_equal_graph_def benchmark_config compute_gradient compute_gradient_error
create_local_cluster get_temp_dir gpu_device_name is_built_with_cuda is_built_with_rocm is_gpu_available main mock
test_src_dir_path
""",
    "tf.feature_column": """
bucketized_column categorical_column_with_hash_bucket categorical_column_with_identity
categorical_column_with_vocabulary_file categorical_column_with_vocabulary_list crossed_column embedding_column
indicator_column input_layer linear_model make_parse_example_spec numeric_column
sequence_categorical_column_with_hash_bucket sequence_categorical_column_with_identity
sequence_categorical_column_with_vocabulary_file sequence_categorical_column_with_vocabulary_list
sequence_numeric_column shared_embedding_columns weighted_categorical_column
""",
    "tf.metrics": """
accuracy auc average_precision_at_k false_negatives false_negatives_at_thresholds false_positives
false_positives_at_thresholds mean mean_absolute_error mean_cosine_distance mean_iou mean_per_class_accuracy
mean_relative_error mean_squared_error mean_tensor percentage_below precision precision_at_k
precision_at_thresholds precision_at_top_k recall recall_at_k recall_at_thresholds recall_at_top_k
root_mean_squared_error sensitivity_at_specificity sparse_average_precision_at_k sparse_precision_at_k
specificity_at_sensitivity true_negatives true_negatives_at_thresholds true_positives
true_positives_at_thresholds
""",
    # tf.keras.*: from TensorFlow's v1 API golden files (tensorflow.keras*.pbtxt, the versions the search
    # index holds); tf.keras.regularizers, absent there, from TF 1.15's API docs.
    "tf.keras": """
Input Model Sequential activations applications backend callbacks constraints datasets estimator experimental
initializers layers losses metrics models optimizers preprocessing regularizers utils wrappers
""",
    "tf.keras.layers": """
AbstractRNNCell Activation ActivityRegularization Add AlphaDropout Average AveragePooling1D AveragePooling2D
AveragePooling3D AvgPool1D AvgPool2D AvgPool3D BatchNormalization Bidirectional Concatenate Conv1D Conv2D
Conv2DTranspose Conv3D Conv3DTranspose ConvLSTM2D Convolution1D Convolution2D Convolution2DTranspose Convolution3D
Convolution3DTranspose Cropping1D Cropping2D Cropping3D CuDNNGRU CuDNNLSTM Dense DenseFeatures DepthwiseConv2D Dot
Dropout ELU Embedding Flatten GRU GRUCell GaussianDropout GaussianNoise GlobalAveragePooling1D GlobalAveragePooling2D
GlobalAveragePooling3D GlobalAvgPool1D GlobalAvgPool2D GlobalAvgPool3D GlobalMaxPool1D GlobalMaxPool2D
GlobalMaxPool3D GlobalMaxPooling1D GlobalMaxPooling2D GlobalMaxPooling3D Input InputLayer InputSpec LSTM LSTMCell
Lambda Layer LayerNormalization LeakyReLU LocallyConnected1D LocallyConnected2D Masking MaxPool1D MaxPool2D MaxPool3D
MaxPooling1D MaxPooling2D MaxPooling3D Maximum Minimum Multiply PReLU Permute RNN ReLU RepeatVector Reshape
SeparableConv1D SeparableConv2D SeparableConvolution1D SeparableConvolution2D SimpleRNN SimpleRNNCell Softmax
SpatialDropout1D SpatialDropout2D SpatialDropout3D StackedRNNCells Subtract ThresholdedReLU TimeDistributed
UpSampling1D UpSampling2D UpSampling3D Wrapper ZeroPadding1D ZeroPadding2D ZeroPadding3D add average concatenate
deserialize dot maximum minimum multiply serialize subtract
""",
    "tf.keras.models": """
Model Sequential clone_model load_model model_from_config model_from_json model_from_yaml save_model
""",
    "tf.keras.optimizers": """
Adadelta Adagrad Adam Adamax Ftrl Nadam Optimizer RMSprop SGD deserialize get schedules serialize
""",
    "tf.keras.losses": """
BinaryCrossentropy CategoricalCrossentropy CategoricalHinge CosineSimilarity Hinge Huber KLD KLDivergence LogCosh
LogLoss Loss MAE MAPE MSE MSLE MeanAbsoluteError MeanAbsolutePercentageError MeanSquaredError
MeanSquaredLogarithmicError Poisson SparseCategoricalCrossentropy SquaredHinge binary_crossentropy
categorical_crossentropy categorical_hinge cosine cosine_proximity cosine_similarity deserialize get hinge kld
kullback_leibler_divergence logcosh mae mape mean_absolute_error mean_absolute_percentage_error mean_squared_error
mean_squared_logarithmic_error mse msle poisson serialize sparse_categorical_crossentropy squared_hinge
""",
    "tf.keras.metrics": """
AUC Accuracy BinaryAccuracy BinaryCrossentropy CategoricalAccuracy CategoricalCrossentropy CategoricalHinge
CosineProximity FalseNegatives FalsePositives Hinge KLDivergence LogCoshError Mean MeanAbsoluteError
MeanAbsolutePercentageError MeanIoU MeanRelativeError MeanSquaredError MeanSquaredLogarithmicError MeanTensor Metric
Poisson Precision Recall RootMeanSquaredError SensitivityAtSpecificity SparseCategoricalAccuracy
SparseCategoricalCrossentropy SparseTopKCategoricalAccuracy SpecificityAtSensitivity SquaredHinge Sum
TopKCategoricalAccuracy TrueNegatives TruePositives KLD MAE MAPE MSE MSLE binary_accuracy binary_crossentropy
categorical_accuracy categorical_crossentropy cosine cosine_proximity deserialize get hinge kld
kullback_leibler_divergence mae mape mean_absolute_error mean_absolute_percentage_error mean_squared_error
mean_squared_logarithmic_error mse msle poisson serialize sparse_categorical_accuracy sparse_categorical_crossentropy
sparse_top_k_categorical_accuracy squared_hinge top_k_categorical_accuracy
""",
    "tf.keras.callbacks": """
BaseLogger CSVLogger Callback EarlyStopping History LambdaCallback LearningRateScheduler ModelCheckpoint
ProgbarLogger ReduceLROnPlateau RemoteMonitor TensorBoard TerminateOnNaN
""",
    "tf.keras.backend": """
name_scope abs all any arange argmax argmin backend batch_dot batch_flatten batch_get_value batch_normalization
batch_set_value bias_add binary_crossentropy cast cast_to_floatx categorical_crossentropy clear_session clip
concatenate constant conv1d conv2d conv2d_transpose conv3d cos count_params ctc_batch_cost ctc_decode
ctc_label_dense_to_sparse dot dropout dtype elu epsilon equal eval exp expand_dims eye flatten floatx foldl foldr
function gather get_session get_uid get_value gradients greater greater_equal hard_sigmoid image_data_format
in_test_phase in_top_k in_train_phase int_shape is_sparse l2_normalize learning_phase less less_equal log
manual_variable_initialization map_fn max maximum mean min minimum moving_average_update ndim
normalize_batch_in_training not_equal one_hot ones ones_like permute_dimensions placeholder pool2d pool3d pow
print_tensor prod random_binomial random_normal random_normal_variable random_uniform random_uniform_variable relu
repeat repeat_elements reset_uids reshape resize_images resize_volumes reverse rnn round separable_conv2d set_epsilon
set_floatx set_image_data_format set_learning_phase set_session set_value shape sigmoid sign sin softmax softplus
softsign sparse_categorical_crossentropy spatial_2d_padding spatial_3d_padding sqrt square squeeze stack std
stop_gradient sum switch tanh temporal_padding to_dense transpose truncated_normal update update_add update_sub var
variable zeros zeros_like
""",
    "tf.keras.utils": """
CustomObjectScope GeneratorEnqueuer OrderedEnqueuer Progbar Sequence SequenceEnqueuer custom_object_scope array_to_img
deserialize_keras_object get_custom_objects get_file get_registered_name get_registered_object get_source_inputs
img_to_array load_img model_to_dot normalize plot_model register_keras_serializable save_img serialize_keras_object
to_categorical
""",
    "tf.keras.initializers": """
Constant Identity Initializer Ones Orthogonal RandomNormal RandomUniform TruncatedNormal VarianceScaling Zeros constant
glorot_normal glorot_uniform he_normal he_uniform identity lecun_normal lecun_uniform normal ones orthogonal
random_normal random_uniform truncated_normal uniform zeros deserialize get serialize
""",
    "tf.keras.regularizers": """
L1L2 Regularizer deserialize get l1 l1_l2 l2 serialize
""",
    "tf.keras.constraints": """
Constraint MaxNorm MinMaxNorm NonNeg UnitNorm max_norm min_max_norm non_neg unit_norm deserialize get serialize
""",
    "tf.keras.activations": """
deserialize elu exponential get hard_sigmoid linear relu selu serialize sigmoid softmax softplus softsign swish tanh
""",
}
