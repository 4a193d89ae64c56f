# Install rules and a package config, so another project can find_package(modeflow) and link it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS modeflow EXPORT modeflowTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/modeflow ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS mf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Headers keep their layer folders: <modeflow/context/context.h>, and the umbrella <modeflow/modeflow.h>.
# Internal headers (*_impl.h) include generated protobuf headers that are not installed: left out.
foreach(layer IN LISTS MODEFLOW_LAYERS)
  install(DIRECTORY ${layer}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/modeflow/${layer}
    FILES_MATCHING PATTERN "*.h" PATTERN "*_impl.h" EXCLUDE)
endforeach()
install(FILES include/modeflow/modeflow.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/modeflow)

install(EXPORT modeflowTargets NAMESPACE modeflow::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/modeflow)
configure_package_config_file(cmake/modeflowConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/modeflowConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/modeflow)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/modeflowConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/modeflowConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/modeflowConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/modeflow)
