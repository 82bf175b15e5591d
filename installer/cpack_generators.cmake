# Read by cpack for each generator (CPACK_PROJECT_CONFIG_FILE): the .deb installs under /usr,
# the .tar.gz is a relocatable tree (bin/, share/) under one folder.
if(CPACK_GENERATOR STREQUAL "TGZ")
  set(CPACK_PACKAGING_INSTALL_PREFIX "")
endif()
